import { getOption } from "@bufbuild/protobuf";
import type { DescField, DescMethod } from "@bufbuild/protobuf";
import { http } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import { compareSpecificity, matchTemplate, parsePathTemplate, splitPath } from "./path-template.js";
import type { PathTemplate, SplitPath } from "./path-template.js";
import { findField, isTextField, resolveFieldPath } from "./field-path.js";
import type { FieldChain } from "./field-path.js";
import type { MethodEntry, MethodTable } from "../../pipeline/method-table.js";

export type UnaryMethod = DescMethod & { methodKind: "unary" };

// Where the HTTP body goes: nowhere, the whole request message ("*"), or one top-level field.
export type BodyBinding = { kind: "none" } | { kind: "all" } | { kind: "field"; field: DescField };

export interface RestRoute {
  httpMethod: string;
  template: PathTemplate;
  method: UnaryMethod;
  // The method's entry in the pipeline's table: its policy and its pipeline.
  entry: MethodEntry;
  body: BodyBinding;
  // One per template variable, in the same order.
  pathFields: FieldChain[];
}

export type RouteLookup =
  | { kind: "found"; route: RestRoute; pathValues: (string | null)[] }
  | { kind: "method_not_allowed"; allow: string[]; entry: MethodEntry }
  | { kind: "not_found" };

// All REST routes of the served methods, read from their google.api.http annotations (additional_bindings
// included) once at start-up. Invalid annotations are programming errors and fail start-up.
export class RouteTable {
  readonly routes: readonly RestRoute[];
  // The methods themselves, by their RPC path: a refusal before routing names the domain of either kind of path.
  readonly methods: MethodTable;
  // What lookup() answers for each template without variables requested exactly as written (by path, then HTTP
  // method), computed by the walk itself at start-up: the path of most calls (POST /v1/encrypt) is then found
  // without splitting, decoding and trying every template in turn.
  readonly #exact = new Map<string, Map<string, RouteLookup>>();

  constructor(table: MethodTable) {
    this.methods = table;
    const routes: RestRoute[] = [];
    const seen = new Set<string>();
    for (const entry of table.entries()) {
      const { method } = entry;
      const rule = getOption(method, http);
      if (rule.pattern.case === undefined) continue;
      if (method.methodKind !== "unary" || entry.invoke === null) {
        throw new Error(`${method.parent.typeName}.${method.name}: only unary methods with a handler have a REST mapping`);
      }
      for (const binding of [rule, ...rule.additionalBindings]) {
        // DescMethod is not a discriminated union, so the check above does not narrow it.
        const route = buildRoute(method as UnaryMethod, entry, binding);
        const key = `${route.httpMethod} ${route.template.source}`;
        if (seen.has(key)) throw new Error(`two methods are bound to ${key}`);
        seen.add(key);
        routes.push(route);
      }
    }
    // Stable sort: among equally specific templates the order of declaration decides.
    this.routes = routes.sort((a, b) => compareSpecificity(a.template, b.template));
    for (const route of this.routes) {
      const path = route.template.source;
      if (route.template.variables.length > 0) continue;
      const found = this.#walk(route.httpMethod, path);
      if (found.kind !== "found" || found.route !== route) continue;
      Object.freeze(found.pathValues);
      const byMethod = this.#exact.get(path) ?? new Map<string, RouteLookup>();
      byMethod.set(route.httpMethod, Object.freeze(found));
      this.#exact.set(path, byMethod);
    }
  }

  // HEAD finds the GET route of its path, which the REST handler serves without its body (RFC 9110 9.3.2), and is
  // allowed wherever GET is. A path value with a malformed percent escape is null (path-template.ts).
  lookup(httpMethod: string, path: string): RouteLookup {
    const method = httpMethod === "HEAD" ? "GET" : httpMethod;
    return this.#exact.get(path)?.get(method) ?? this.#walk(method, path);
  }

  #walk(httpMethod: string, path: string): RouteLookup {
    const split = parseRequestPath(path);
    const allow = new Set<string>();
    let entry: MethodEntry | undefined;
    for (const route of this.routes) {
      const target = route.template.verb === undefined ? split.whole : split.verbs.get(route.template.verb);
      if (target === undefined) continue;
      const pathValues = matchTemplate(route.template, target);
      if (pathValues === undefined) continue;
      if (route.httpMethod === httpMethod) return { kind: "found", route, pathValues };
      allow.add(route.httpMethod);
      if (route.httpMethod === "GET") allow.add("HEAD");
      entry ??= route.entry;
    }
    return entry !== undefined ? { kind: "method_not_allowed", allow: [...allow].sort(), entry } : { kind: "not_found" };
  }
}

interface RequestPath {
  whole: SplitPath;
  // The path without a trailing ":verb", keyed by that verb (at most one entry).
  verbs: Map<string, SplitPath>;
}

function parseRequestPath(path: string): RequestPath {
  const verbs = new Map<string, SplitPath>();
  const colon = path.lastIndexOf(":");
  if (colon > path.lastIndexOf("/")) verbs.set(path.slice(colon + 1), splitPath(path.slice(0, colon)));
  return { whole: splitPath(path), verbs };
}

function buildRoute(method: UnaryMethod, entry: MethodEntry, rule: HttpRule): RestRoute {
  const where = `${method.parent.typeName}.${method.name}`;
  const { pattern } = rule;
  let httpMethod: string;
  let path: string;
  switch (pattern.case) {
    case "get":
    case "put":
    case "post":
    case "delete":
    case "patch":
      httpMethod = pattern.case.toUpperCase();
      path = pattern.value;
      break;
    case "custom":
      httpMethod = pattern.value.kind.toUpperCase();
      path = pattern.value.path;
      break;
    case undefined:
      throw new Error(`${where}: an additional binding has no pattern`);
  }
  // Failing loudly beats answering with the whole message where the annotation asks for one field.
  if (rule.responseBody !== "") throw new Error(`${where}: response_body is not supported`);
  const template = parsePathTemplate(path);
  const pathFields = template.variables.map((v) => {
    const chain = resolveFieldPath(method.input, v.fieldPath);
    if (chain === undefined || chain.leaf.fieldKind === "list" || !isTextField(chain.leaf)) {
      const input = method.input.typeName;
      throw new Error(`${where}: path variable ${v.fieldPath} must name a singular scalar field of ${input}`);
    }
    return chain;
  });
  return { httpMethod, template, method, entry, body: bodyBinding(method, rule.body, where), pathFields };
}

function bodyBinding(method: UnaryMethod, body: string, where: string): BodyBinding {
  if (body === "") return { kind: "none" };
  if (body === "*") return { kind: "all" };
  const field = findField(method.input, body);
  if (field === undefined || field.name !== body) {
    throw new Error(`${where}: body ${body} is not a top-level field of ${method.input.typeName}`);
  }
  return { kind: "field", field };
}
