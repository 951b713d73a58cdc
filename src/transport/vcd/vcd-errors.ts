import type { Logger } from "pino";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import type { ErrorDomain, Reason } from "../../errors/reasons.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { callErrorOf } from "../../pipeline/call-error.js";
import { httpStatusOfError, retryAfterSeconds } from "../rest/status-json.js";
import { BEARER_CHALLENGE } from "../auth-challenge.js";
import { errorDocument, minorErrorCodeOf } from "./vcd-xml.js";

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const ERROR_TYPE = "application/vnd.vmware.vcloud.error+xml";

// The reasons the virtualization API names as minorErrorCode themselves; every other error takes the code of its
// HTTP status (vcd-xml.ts).
const ownMinorCodes = new Set(["INVALID_REFERENCE"]);

// The virtualization API answers an unknown vDC as one the caller may not use (CONTRACT section 7: 403 for "an
// unknown or foreign vDC"), so that vDC ids reveal nothing there; the other surfaces answer NOT_FOUND, as for node
// pools.
const forbiddenReasons = new Set(["SERVICE_INSTANCE_NOT_FOUND"]);

// Without a negotiated version, plain XML.
function errorContentType(version: string | null): string {
  return version === null ? "application/xml" : `${ERROR_TYPE};version=${version}`;
}

// An Error document for a refusal of the adapter itself (no version, wrong media type, unreadable XML), with its
// ErrorInfo.reason as vendorSpecificErrorCode like every other Error: a missing or unsupported version is
// PROTOCOL_ERROR, an unknown path ROUTE_NOT_FOUND, another method METHOD_NOT_ALLOWED, a login without Basic
// credentials UNAUTHENTICATED. Without a negotiated version the Content-Type is plain XML.
export function refusal(version: string | null, status: number, message: string, reason: Reason, extra: Record<string, string> = {}): Answer {
  return { status, headers: { "content-type": errorContentType(version), ...extra }, body: errorDocument(status, minorErrorCodeOf(status), message, reason) };
}

// An Error document for whatever a call threw: the HTTP status and Retry-After the REST surface gives the same
// error, the message, and ErrorInfo.reason as vendorSpecificErrorCode. A fault is logged with the request id and
// answered without internals.
export function errorAnswer(version: string | null, thrown: unknown, domain: ErrorDomain, requestId: string, logger: Logger | null): Answer {
  const callError = callErrorOf(thrown, domain, requestId);
  if (callError.internal) logger?.error({ err: thrown, requestId }, "a virtualization API call failed with an internal error");
  const error = toConnectError(callError, null);
  const reason = error.findDetails(ErrorInfoSchema)[0]?.reason ?? null;
  const status = reason !== null && forbiddenReasons.has(reason) ? 403 : httpStatusOfError(error);
  const extra: Record<string, string> = {};
  const retryAfter = retryAfterSeconds(error);
  if (retryAfter !== undefined) extra["retry-after"] = String(retryAfter);
  // Every call but POST /api/sessions (whose 401 challenges Basic, vcd-handler.ts) takes the session's bearer token.
  if (status === 401) extra["www-authenticate"] = BEARER_CHALLENGE;
  const minor = reason !== null && ownMinorCodes.has(reason) ? reason : minorErrorCodeOf(status);
  return { status, headers: { "content-type": errorContentType(version), ...extra }, body: errorDocument(status, minor, error.rawMessage, reason) };
}
