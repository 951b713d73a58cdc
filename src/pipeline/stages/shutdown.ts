import { serverShuttingDown } from "../../errors/protocol-errors.js";
import type { Stage } from "../stage.js";

// Once the server has begun to shut down, a call that still arrives (on an HTTP/1.1 connection kept alive, or an
// HTTP/2 session not yet told to go away) is refused before it can change anything. The drain waits for the calls
// already running, then the audit trail's last records are stored and the store is closed: a call let in later could
// commit its write and then find the store closed for its record, answered UNAVAILABLE with its change made and
// unrecorded (a probe on PostgreSQL, 2026-11-28: keys stored by calls the caller was told to retry).
export function shutdownStage(draining: AbortSignal): Stage {
  return (call, next) => {
    if (draining.aborted) throw serverShuttingDown(call.entry.policy.domain);
    return next(call);
  };
}
