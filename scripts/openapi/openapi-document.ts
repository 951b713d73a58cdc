import { getOption } from "@bufbuild/protobuf";
import type { DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { method_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { isTextField, resolveFieldPath } from "../../src/transport/rest/field-path.js";
import { parsePathTemplate } from "../../src/transport/rest/path-template.js";
import { describe } from "./comments.js";
import { SchemaSet, anySchema, isRequired } from "./json-schema.js";
import type { Schema } from "./json-schema.js";

// The OpenAPI 3.1 document of the REST surface, from the same google.api.http annotations the server's router
// reads (src/transport/rest/route-table.ts) and the proto comments: one operation per binding, its path and query
// parameters, its body, its answer, and the google.rpc.Status body of every error.

export interface DocumentInfo {
  title: string;
  version: string;
  description: string;
}

// The HTTP statuses a REST call may answer with an error (CONTRACT section 4: the status of the google.rpc.Code,
// Connect's mapping); each with the same google.rpc.Status body.
const errorStatuses: Record<string, string> = {
  "400": "INVALID_ARGUMENT (a BadRequest detail names each bad field), FAILED_PRECONDITION (PreconditionFailure) or OUT_OF_RANGE",
  "401": "UNAUTHENTICATED: no credentials, or credentials that are not valid",
  "403": "PERMISSION_DENIED: the caller's grants do not allow the call",
  "404": "NOT_FOUND: the resource does not exist (ResourceInfo), or the caller may not see it",
  "409": "ALREADY_EXISTS: the name is taken (ResourceInfo)",
  "413": "RESOURCE_EXHAUSTED: the request body is over the size limit",
  "429": "RESOURCE_EXHAUSTED: a rate limit or quota (QuotaFailure, RetryInfo; Retry-After says when to try again)",
  "500": "INTERNAL: a fault of the server; quote the request id",
  "503": "UNAVAILABLE: try again later",
  "504": "DEADLINE_EXCEEDED: the call took longer than its deadline",
};

const statusSchema: Schema = {
  type: "object",
  description: "google.rpc.Status: every failure, with the HTTP status of its code.",
  properties: {
    code: { type: "integer", format: "int32", description: "The google.rpc.Code (3 INVALID_ARGUMENT, 5 NOT_FOUND, 16 UNAUTHENTICATED ...)" },
    message: { type: "string", description: "What was wrong, for a person to act on" },
    details: {
      type: "array",
      description:
        "google/rpc/error_details.proto messages: always an ErrorInfo (stable reason and domain), and BadRequest, ResourceInfo, PreconditionFailure, QuotaFailure or RetryInfo by case",
      items: { $ref: "#/components/schemas/google.protobuf.Any" },
    },
  },
  required: ["code", "message", "details"],
  additionalProperties: false,
};

export function openApiDocument(services: readonly DescService[], info: DocumentInfo): Schema {
  const schemas = new SchemaSet();
  const paths: Record<string, Record<string, Schema>> = {};
  const tags: Schema[] = [];
  // Paths that differ only in the names of their variables are one path in OpenAPI ("/v1/keys/{keyId}" and
  // "/v1/keys/{key.id}"): the first names given to a shape are used by every operation on it.
  // Those without a dot are preferred: "{keyId}" over "{key.id}".
  const names = new Map<string, string[]>();
  for (const { method, template } of bindings(services)) {
    const own = parsePathTemplate(template).variables.map((v) => jsonPathOf(method.input, v.fieldPath));
    const known = names.get(shapeOf(template));
    if (known === undefined || (known.some((n) => n.includes(".")) && !own.some((n) => n.includes(".")))) names.set(shapeOf(template), own);
  }
  for (const service of services) {
    tags.push({ name: service.typeName, description: describe(service) ?? service.name });
    for (const method of service.methods) {
      const rule = getOption(method, http);
      if (rule.pattern.case === undefined) continue;
      for (const binding of [rule, ...rule.additionalBindings]) {
        const { verb, template } = patternOf(binding);
        const shape = shapeOf(template);
        const variableNames = names.get(shape)!;
        let i = 0;
        const path = shape.replace(/\{\}/g, () => `{${variableNames[i++]!}}`);
        const operations = (paths[path] ??= {});
        if (operations[verb] !== undefined) throw new Error(`two methods are bound to ${verb.toUpperCase()} ${path}`);
        operations[verb] = operation(method, binding, template, variableNames, schemas);
      }
    }
  }
  const components: Record<string, Schema> = { "google.protobuf.Any": anySchema, "google.rpc.Status": statusSchema };
  for (const [name, schema] of [...schemas.schemas].sort(([a], [b]) => a.localeCompare(b))) components[name] = schema;
  return {
    openapi: "3.1.0",
    info: { title: info.title, version: info.version, description: info.description },
    servers: [{ url: "http://localhost:8080", description: "npm start" }],
    tags,
    paths,
    components: {
      schemas: components,
      responses: Object.fromEntries(
        Object.entries(errorStatuses).map(([status, text]) => [
          `Error${status}`,
          {
            description: text,
            headers: {
              ...headerRefs(["x-request-id", ...rateLimitHeaders]),
              ...(status === "429" ? { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" } } } : {}),
            },
            content: { "application/json": { schema: { $ref: "#/components/schemas/google.rpc.Status" } } },
          },
        ]),
      ),
      headers: {
        "x-request-id": { description: "The call's request id", schema: { type: "string" } },
        ...Object.fromEntries(rateLimitHeaders.map((name) => [name, { description: `${rateLimitHeaderText[name]}. ${RATE_LIMITED}`, schema: { type: "integer" } }])),
      },
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "An access token from POST /public/v2/service_auth (the bare token works too)" },
        apiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "An API key of the workspace named in x-workspace-id" },
      },
    },
  };
}

// The rate-limit stage's headers (src/pipeline/stages/rate-limit.ts), on every answer of a limited service's call but
// native gRPC successes. Whether a service is limited is a setting, so the document declares them on every operation
// and says when they come; they were in docs/rate-limits.md alone before (a probe, 2026-11-28).
const rateLimitHeaders = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"] as const;
const rateLimitHeaderText: Record<(typeof rateLimitHeaders)[number], string> = {
  "X-RateLimit-Limit": "The limit of the window shown (the minute's or the day's, whichever runs out first)",
  "X-RateLimit-Remaining": "Calls left in that window (0 when refused)",
  "X-RateLimit-Reset": "Whole seconds until that window starts afresh",
};
const RATE_LIMITED =
  "Sent when the method's service is rate-limited: RATE_LIMIT_SERVICES, the compute services by default (docs/rate-limits.md)";

function headerRefs(names: readonly string[]): Record<string, Schema> {
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

function* bindings(services: readonly DescService[]): Generator<{ method: DescMethod; template: string }> {
  for (const service of services) {
    for (const method of service.methods) {
      const rule = getOption(method, http);
      if (rule.pattern.case === undefined) continue;
      for (const binding of [rule, ...rule.additionalBindings]) yield { method, template: patternOf(binding).template };
    }
  }
}

function shapeOf(template: string): string {
  return template.replace(/\{[^}]*\}/g, "{}");
}

function patternOf(rule: HttpRule): { verb: string; template: string } {
  switch (rule.pattern.case) {
    case "get":
    case "put":
    case "post":
    case "delete":
    case "patch":
      return { verb: rule.pattern.case, template: rule.pattern.value };
    default:
      throw new Error(`unsupported google.api.http pattern ${String(rule.pattern.case)}`);
  }
}

function jsonPathOf(input: DescMessage, fieldPath: string): string {
  const chain = resolveFieldPath(input, fieldPath);
  if (chain === undefined) throw new Error(`${input.typeName} has no field ${fieldPath}`);
  return chain.jsonPath;
}

function operation(method: DescMethod, rule: HttpRule, template: string, variableNames: string[], schemas: SchemaSet): Schema {
  const input = method.input;
  const variables = parsePathTemplate(template).variables;
  for (const v of variables) {
    if (v.end === undefined || v.end - v.start !== 1) throw new Error(`${method.name}: the variable ${v.fieldPath} of ${template} has no OpenAPI form`);
  }
  const pathFields = variables.map((v) => resolveFieldPath(input, v.fieldPath)!);
  const parameters: Schema[] = pathFields.map((chain, i) => ({
    name: variableNames[i],
    in: "path",
    required: true,
    description: [describe(chain.leaf), variableNames[i] === chain.jsonPath ? undefined : `Sets ${chain.jsonPath}.`].filter((t) => t !== undefined).join(" "),
    schema: schemas.field(chain.leaf),
  }));
  const topPathFields = new Set(pathFields.map((c) => (c.parents[0] ?? c.leaf).name));
  const pathLeaves = new Set(pathFields.map((c) => c.jsonPath));
  let requestBody: Schema | undefined;
  if (rule.body === "*") {
    // Fields bound to the path may be repeated in the body (they must then agree), so only the whole-field
    // variables leave it.
    const bound = new Set(pathFields.filter((c) => c.parents.length === 0).map((c) => c.leaf.name));
    requestBody = { required: true, content: { "application/json": { schema: schemas.object(input, (f) => !bound.has(f.name)) } } };
  } else {
    if (rule.body !== "") {
      const field = input.fields.find((f) => f.name === rule.body);
      if (field === undefined) throw new Error(`${method.name}: body field ${rule.body} does not exist`);
      requestBody = { required: true, content: { "application/json": { schema: schemas.field(field) } } };
    }
    for (const field of input.fields) {
      if (field.name === rule.body || topPathFields.has(field.name)) continue;
      queryParameters(field, "", schemas, parameters, pathLeaves);
    }
  }
  const policy = getOption(method, method_policy);
  const security = policy.public ? [] : policy.requiresApiKey ? [{ bearer: [], apiKey: [] }] : [{ bearer: [] }];
  // The workspace the API key belongs to, which such a call needs beside it (CONTRACT section 6). Declared only in
  // prose before, so that Swagger UI and generated clients sent the key without it and got 401 (a probe,
  // 2026-11-28). A parameter rather than a third security scheme: it names the workspace, it is no secret.
  if (policy.requiresApiKey) {
    parameters.push({
      name: "x-workspace-id",
      in: "header",
      required: true,
      description: "The workspace the API key in x-api-key belongs to",
      schema: { type: "string" },
    });
  }
  const errors = Object.fromEntries(Object.keys(errorStatuses).map((status) => [status, { $ref: `#/components/responses/Error${status}` }]));
  const responseType = rule.responseBody === "" ? schemas.ref(method.output) : schemas.field(method.output.fields.find((f) => f.name === rule.responseBody)!);
  const op: Schema = {
    operationId: `${method.parent.typeName}.${method.name}`,
    tags: [method.parent.typeName],
    summary: method.name,
    description: describe(method),
    parameters: parameters.map(dropUndefined),
    ...(requestBody !== undefined ? { requestBody } : {}),
    responses: {
      "200": {
        description: `${method.output.name}`,
        headers: headerRefs(["x-request-id", ...rateLimitHeaders]),
        content: { "application/json": { schema: responseType } },
      },
      ...errors,
    },
    security,
  };
  return dropUndefined(op);
}

// grpc-gateway's query mapping (src/transport/rest/query-params.ts): fields that can be written as text, with
// dotted names for the fields of nested messages, one parameter per element of a repeated field.
function queryParameters(field: DescField, prefix: string, schemas: SchemaSet, out: Schema[], skip: Set<string>): void {
  const name = `${prefix}${field.jsonName}`;
  if (skip.has(name)) return;
  if (isTextField(field)) {
    const repeated = field.fieldKind === "list";
    // A top-level REQUIRED field is a required parameter (the server refuses a call without it); a field of a nested
    // message is required only as part of it, which a query cannot say. They were all optional (a probe, 2026-11-28).
    const required = prefix === "" && isRequired(field);
    out.push({
      name,
      in: "query",
      description: describe(field),
      schema: schemas.field(field),
      ...(required ? { required: true } : {}),
      ...(repeated ? { style: "form", explode: true } : {}),
    });
    return;
  }
  if (field.fieldKind === "message") {
    for (const inner of field.message.fields) queryParameters(inner, `${name}.`, schemas, out, skip);
  }
}

function dropUndefined(o: Schema): Schema {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
