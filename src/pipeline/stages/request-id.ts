import type { Stage } from "../stage.js";

// Every response carries the call's request id (the caller's own when it sent a plain one), success or failure,
// so that a caller can quote it and find the server's log lines.
export const requestIdStage: Stage = (call, next) => {
  call.addResponseHeader("x-request-id", call.requestId);
  return next(call);
};
