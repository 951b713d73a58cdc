import { getOption, hasOption } from "@bufbuild/protobuf";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { method_policy, service_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import type { ErrorDomain } from "../errors/reasons.js";

// What the pipeline's stages know about a method before any call: declared in proto/ as the
// (cloudplane.api.v1.method_policy) and (cloudplane.api.v1.service_policy) options.
export interface MethodPolicy {
  // "" only for the standard infrastructure services below.
  permission: string;
  longRunning: boolean;
  domain: ErrorDomain;
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

// Throws at start-up for a method that declares no policy: a method nobody thought about is not served.
export function policyOf(method: DescMethod): MethodPolicy {
  const service = method.parent;
  const where = `${service.typeName}.${method.name}`;
  const vendored = infrastructure[service.typeName];
  if (vendored !== undefined) {
    return { permission: "", longRunning: vendored.longRunning.includes(method.name), domain: "cloudplane" };
  }
  if (!hasOption(method, method_policy)) throw new Error(`${where} declares no (cloudplane.api.v1.method_policy)`);
  const policy = getOption(method, method_policy);
  if (policy.permission === "") throw new Error(`${where}: its method_policy names no permission`);
  return { permission: policy.permission, longRunning: policy.longRunning, domain: domainOf(service) };
}

function domainOf(service: DescService): ErrorDomain {
  const domain = getOption(service, service_policy).errorDomain;
  const known = domains.find((d) => d === domain);
  if (known === undefined) {
    throw new Error(`${service.typeName}: service_policy.error_domain must be one of ${domains.join(", ")}, got "${domain}"`);
  }
  return known;
}
