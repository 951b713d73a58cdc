import type { AccessPolicy } from "../../identity/access-policy.js";
import { MAX_ID_CHARS } from "../../errors/violation-list.js";
import { permissionDenied } from "../../identity/identity-errors.js";
import type { GrantRecord } from "../../identity/identity-model.js";
import { formatScope } from "../../identity/scopes.js";
import type { Scope } from "../../identity/scopes.js";
import type { Call } from "../call.js";
import type { Next, Outcome, Stage } from "../stage.js";

// How the authorization stage learns the namespace of a key a request names by id (from the key manager, whose
// cache answers most calls synchronously), and the error a caller gets for a key that does not exist.
export interface KeyScopes {
  // Null when no live key has the id: the call is then answered keyNotFound.
  namespaceOfKey(keyId: string): string | null | Promise<string | null>;
  keyNotFound(keyId: string): Error;
}

// How the authorization stage learns the service instance (vDC) of a vApp or vApp task a request names by id, and
// the errors a caller gets for one that does not exist.
export interface VAppScopes {
  // Null when no vApp (task) has the id.
  serviceInstanceOfVApp(vappId: string): Promise<string | null>;
  serviceInstanceOfTask(taskId: string): Promise<string | null>;
  vappNotFound(vappId: string): Error;
  taskNotFound(taskId: string): Error;
}

// Checks that the caller's grants allow the method's permission on the call's scope (CONTRACT section 4:
// PERMISSION_DENIED). A caller with no grant at all on the namespace of a key it names by id is answered exactly
// as if the key did not exist, so that key ids reveal nothing across namespaces.
export function authorizationStage(access: AccessPolicy, keys: KeyScopes, vapps: VAppScopes): Stage {
  function denied(call: Call, scope: string): never {
    const { permission, domain } = call.entry.policy;
    const where = scope === "" ? "any scope" : scope;
    throw permissionDenied(domain, `principal ${call.principal} lacks permission ${permission} on ${where}`, { permission, scope });
  }

  function onScope(call: Call, grants: readonly GrantRecord[], scope: Scope, next: Next, hide: (() => never) | null): Outcome {
    call.scope = formatScope(scope);
    const decision = access.decide(grants, call.entry.policy.permission, scope);
    if (decision === "allowed") return next(call);
    if (decision === "hidden" && hide !== null) hide();
    return denied(call, call.scope);
  }

  function onKey(call: Call, grants: readonly GrantRecord[], keyId: string, namespace: string | null, next: Next): Outcome {
    // No live key has the id: answered here, as a key of a namespace the caller cannot see is, before the handler
    // looks at the rest of the request. Were the handler to refuse an invalid request for a missing key
    // (INVALID_ARGUMENT) while a hidden key's is NOT_FOUND, an invalid request would tell which ids exist elsewhere.
    if (namespace === null) throw keys.keyNotFound(keyId);
    return onScope(call, grants, { kind: "kms-namespace", id: namespace }, next, () => {
      throw keys.keyNotFound(keyId);
    });
  }

  // A vApp or task of a vDC the caller holds no grant on is answered exactly as one that does not exist, as keys are.
  function onOwned(call: Call, grants: readonly GrantRecord[], serviceInstanceId: string | null, next: Next, notFound: () => Error): Outcome {
    if (serviceInstanceId === null) throw notFound();
    return onScope(call, grants, { kind: "service-instance", id: serviceInstanceId }, next, () => {
      throw notFound();
    });
  }

  function withGrants(call: Call, grants: readonly GrantRecord[], next: Next): Outcome {
    const { scope: rule, permission } = call.entry.policy;
    if (rule === null) return next(call);
    // A principal that may not do this anywhere is refused whatever the request names, which reveals nothing.
    if (!access.allowedSomewhere(grants, permission)) return denied(call, "");
    const id = rule.read === null ? (call.credentials.workspaceId ?? "") : rule.read(call.request);
    // The request names no scope; its handler refuses it as invalid.
    if (id === "") return next(call);
    switch (rule.kind) {
      case "kms-key": {
        // An id longer than any key's: its handler refuses it as invalid, without repeating it.
        if (id.length > MAX_ID_CHARS) return next(call);
        const namespace = keys.namespaceOfKey(id);
        if (namespace instanceof Promise) return namespace.then((found) => onKey(call, grants, id, found, next));
        return onKey(call, grants, id, namespace, next);
      }
      case "vapp":
      case "vapp-task": {
        if (id.length > MAX_ID_CHARS) return next(call);
        const notFound = rule.kind === "vapp" ? () => vapps.vappNotFound(id) : () => vapps.taskNotFound(id);
        const owner = rule.kind === "vapp" ? vapps.serviceInstanceOfVApp(id) : vapps.serviceInstanceOfTask(id);
        return owner.then((found) => onOwned(call, grants, found, next, notFound));
      }
      case "kms-namespace":
      case "service-instance":
      case "workspace":
        return onScope(call, grants, { kind: rule.kind, id }, next, null);
    }
  }

  return (call, next) => {
    if (call.entry.policy.scope === null) return next(call);
    // Cached grants answer synchronously; a principal not seen since access last changed waits for the store.
    const grants = access.grantsOf(call.principal);
    if (grants instanceof Promise) return grants.then((loaded) => withGrants(call, loaded, next));
    return withGrants(call, grants, next);
  };
}
