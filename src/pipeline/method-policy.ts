import { getOption, hasOption } from "@bufbuild/protobuf";
import type { DescMethod, DescService, Message } from "@bufbuild/protobuf";
import { method_policy, service_policy, Scope_Kind } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { ErrorDomain } from "../errors/reasons.js";
import { rateClassOf } from "../ratelimit/rate-limits.js";
import type { RateClass } from "../ratelimit/rate-limits.js";
import { resourcePathOf, stringFieldReader } from "./request-fields.js";
import type { FieldReader } from "./request-fields.js";

// Where the access check of a call is made: the scope kind and how to read its id from the request.
export interface ScopeRule {
  // "kms-key": the request names a key; its namespace is the scope. "vapp", "vapp-task": the request names a vApp
  // or a vApp task; its service instance (vDC) is the scope.
  kind: "kms-namespace" | "kms-key" | "service-instance" | "workspace" | "vapp" | "vapp-task";
  // Reads the id from the request; for "workspace" the id comes from x-workspace-id instead.
  read: FieldReader | null;
}

// What the pipeline's stages know about a method before any call: declared in proto/ as the
// (cloudplane.api.v1.method_policy) and (cloudplane.api.v1.service_policy) options.
export interface MethodPolicy {
  // "" only for the standard infrastructure services below.
  permission: string;
  longRunning: boolean;
  domain: ErrorDomain;
  // No credentials needed: health, reflection, and obtaining a token.
  public: boolean;
  requiresApiKey: boolean;
  // Null exactly for public methods.
  scope: ScopeRule | null;
  // Every KMS call and every mutation (a method whose REST mapping is not GET) is recorded in the audit trail.
  audited: boolean;
  // Which rate limits the call counts against, by the HTTP method of its google.api.http rule whatever protocol
  // carries it; null for the infrastructure services, which have no rule and are never limited.
  rateClass: RateClass | null;
  // The resource the call names, for the audit trail: its REST path, the request's ids percent-encoded in it.
  resource: (request: Message) => string;
}

const domains: readonly ErrorDomain[] = ["kms", "compute", "cloudplane"];

// gRPC's own health and reflection protos are vendored as their owners publish them, so they cannot carry our
// options; their policy is written here, the one place that names services by hand. Both are open to every
// caller, as health checkers and tools such as `buf curl` expect.
const infrastructure: Record<string, { longRunning: readonly string[] }> = {
  "grpc.health.v1.Health": { longRunning: ["Watch"] },
  "grpc.reflection.v1.ServerReflection": { longRunning: ["ServerReflectionInfo"] },
  "grpc.reflection.v1alpha.ServerReflection": { longRunning: ["ServerReflectionInfo"] },
};

const scopeKinds: Partial<Record<Scope_Kind, ScopeRule["kind"]>> = {
  [Scope_Kind.KMS_NAMESPACE]: "kms-namespace",
  [Scope_Kind.KMS_KEY]: "kms-key",
  [Scope_Kind.SERVICE_INSTANCE]: "service-instance",
  [Scope_Kind.WORKSPACE]: "workspace",
  [Scope_Kind.VAPP]: "vapp",
  [Scope_Kind.VAPP_TASK]: "vapp-task",
};

// Throws at start-up for a method that declares no policy, or one that names no scope without being public: a
// method nobody thought about is not served, and a method whose access nobody decided is not open.
export function policyOf(method: DescMethod): MethodPolicy {
  const service = method.parent;
  const where = `${service.typeName}.${method.name}`;
  const vendored = infrastructure[service.typeName];
  if (vendored !== undefined) {
    return {
      permission: "",
      longRunning: vendored.longRunning.includes(method.name),
      domain: "cloudplane",
      public: true,
      requiresApiKey: false,
      scope: null,
      audited: false,
      rateClass: null,
      resource: () => "",
    };
  }
  if (!hasOption(method, method_policy)) throw new Error(`${where} declares no (cloudplane.api.v1.method_policy)`);
  const policy = getOption(method, method_policy);
  if (policy.permission === "") throw new Error(`${where}: its method_policy names no permission`);
  const mapping = httpMappingOf(method, where);
  return {
    permission: policy.permission,
    longRunning: policy.longRunning,
    domain: domainOf(service),
    public: policy.public,
    requiresApiKey: policy.requiresApiKey,
    scope: scopeOf(method, where, policy.public, policy.scope),
    audited: domainOf(service) === "kms" || !readOnly.has(mapping.httpMethod),
    rateClass: rateClassOf(mapping.httpMethod),
    resource: resourcePathOf(method.input, templateOf(method, mapping.path, policy.scope)),
  };
}

// The path template that names the resource of a call in the audit trail (for a method with a policy and a
// google.api.http mapping): the method's own REST path, unless the method names a key by id without its path saying
// so (Encrypt, Decrypt: POST /v1/encrypt). Then it is the path of the key itself, as the service's GET of one key
// maps it (/v1/keys/{key_id}), so that a key's trail lists its every use.
export function resourceTemplateOf(method: DescMethod): string {
  const where = `${method.parent.typeName}.${method.name}`;
  return templateOf(method, httpMappingOf(method, where).path, getOption(method, method_policy).scope);
}

function templateOf(method: DescMethod, own: string, scope: { kind: Scope_Kind; field: string } | undefined): string {
  if (scope?.kind !== Scope_Kind.KMS_KEY) return own;
  const variable = new RegExp(`\\{${scope.field.replaceAll(".", "\\.")}(=[^}]*)?\\}`);
  if (variable.test(own)) return own;
  for (const sibling of method.parent.methods) {
    const pattern = getOption(sibling, http).pattern;
    if (pattern.case === "get" && /^[^{}]*\{[^{}]+\}$/.test(pattern.value) && variable.test(pattern.value)) return pattern.value;
  }
  return own;
}

const readOnly = new Set(["GET", "HEAD"]);

// The method's REST mapping: an HTTP method and a path template, from one of the five standard verbs or from a
// custom one (`custom: { kind: "PURGE", path: ... }`), which the REST routes serve as well.
function httpMappingOf(method: DescMethod, where: string): { httpMethod: string; path: string } {
  const pattern = getOption(method, http).pattern;
  switch (pattern.case) {
    case undefined:
      throw new Error(`${where} has no google.api.http mapping`);
    case "custom":
      return { httpMethod: pattern.value.kind.toUpperCase(), path: pattern.value.path };
    default:
      return { httpMethod: pattern.case.toUpperCase(), path: pattern.value };
  }
}

function scopeOf(method: DescMethod, where: string, isPublic: boolean, scope: { kind: Scope_Kind; field: string } | undefined): ScopeRule | null {
  const kind = scope === undefined ? undefined : scopeKinds[scope.kind];
  if (isPublic) {
    if (kind !== undefined) throw new Error(`${where}: a public method has no scope`);
    return null;
  }
  if (kind === undefined || scope === undefined) throw new Error(`${where}: its method_policy names no scope`);
  if (kind === "workspace") return { kind, read: null };
  return { kind, read: stringFieldReader(method.input, scope.field) };
}

function domainOf(service: DescService): ErrorDomain {
  const domain = getOption(service, service_policy).errorDomain;
  const known = domains.find((d) => d === domain);
  if (known === undefined) {
    throw new Error(`${service.typeName}: service_policy.error_domain must be one of ${domains.join(", ")}, got "${domain}"`);
  }
  return known;
}
