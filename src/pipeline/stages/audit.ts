import { ConnectError } from "@connectrpc/connect";
import { DomainError } from "../../errors/domain-error.js";
import { statusPartsOf } from "../../errors/status-details.js";
import type { AuditTrail } from "../../identity/audit-trail.js";
import type { Clock } from "../../shared/clock.js";
import type { Call } from "../call.js";
import { MAX_NAMED_CHARS } from "../request-fields.js";
import { CallError } from "../call-error.js";
import type { Stage } from "../stage.js";

const INTERNAL = 13;

// What a record says of the request (its scope and resource) is read from the caller's ids, which a refused call
// has not had validated: a GetCryptoKey with a 4 MB key id, refused as INVALID_ARGUMENT, stored its 4 MB in the
// trail. The resource is cut where it is made (`resourcePathOf`), the scope here.
function bounded(text: string): string {
  if (text.length <= MAX_NAMED_CHARS) return text;
  // Not between the two halves of a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(text.charAt(MAX_NAMED_CHARS - 1)) ? MAX_NAMED_CHARS - 1 : MAX_NAMED_CHARS;
  return `${text.slice(0, end)}...(${text.length} characters)`;
}

// The google.rpc.Code a thrown value will be answered with (the errors stage, outside this one, renders it).
function codeOf(thrown: unknown): number {
  if (thrown instanceof CallError) return thrown.status.code;
  if (thrown instanceof DomainError) return statusPartsOf(thrown).code;
  if (thrown instanceof ConnectError) return thrown.code;
  return INTERNAL;
}

function auditUnavailable(call: Call): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "AUDIT_UNAVAILABLE",
    domain: call.entry.policy.domain,
    // The record follows the handler's own commit, so a change may have been made: "retry later" alone had callers
    // create a key twice (a probe on a full disk, 2026-11-28; docs/errors.md).
    message: "the call could not be recorded in the audit trail, so its result is not returned; a change it made may have taken effect: read before retrying a change",
    retryAfterSeconds: 1,
  });
}

// Records every KMS call and every mutation, whatever its outcome, once its outcome is known: who (the principal),
// what (method and resource), where (the scope), the result code and the request id; never a body. The caller is
// answered only once the record is stored, and gets UNAVAILABLE when it cannot be. Failed calls of callers who are
// not authenticated are not recorded (only logged), so that nobody can fill the trail without credentials.
export function auditStage(trail: AuditTrail, clock: Clock): Stage {
  function record(call: Call, code: number): Promise<void> {
    const policy = call.entry.policy;
    return trail.append({
      at: clock.now(),
      principal: call.principal,
      method: call.entry.name,
      protocol: call.protocol,
      scope: bounded(call.scope),
      // Its ids percent-encoded as a REST URL carries them, and cut (src/pipeline/request-fields.ts).
      resource: policy.resource(call.request),
      code,
      requestId: call.requestId,
    });
  }

  function failed(call: Call, thrown: unknown): Promise<never> | never {
    if (call.principal === "anonymous") throw thrown;
    return record(call, codeOf(thrown)).then(
      () => {
        throw thrown;
      },
      () => {
        throw auditUnavailable(call);
      },
    );
  }

  function succeeded<T>(call: Call, value: T): Promise<T> {
    return record(call, 0).then(
      () => value,
      () => {
        throw auditUnavailable(call);
      },
    );
  }

  return (call, next) => {
    if (!call.entry.policy.audited) return next(call);
    let outcome;
    try {
      outcome = next(call);
    } catch (thrown) {
      return failed(call, thrown);
    }
    if (outcome instanceof Promise) {
      return outcome.then(
        (value: unknown) => succeeded(call, value),
        (thrown: unknown) => failed(call, thrown),
      );
    }
    return succeeded(call, outcome);
  };
}
