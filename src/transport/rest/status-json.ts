import { create, toBinary } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "../connect/connect-internals.js";
import { ErrorInfoSchema, RetryInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { anyToRestJson } from "./json-any.js";

// A google.rpc.Status as the REST surface writes it: {"code": <google.rpc.Code>, "message", "details": [Any]},
// each Any as {"typeUrl", "value"} (CONTRACT sections 3 and 4).
export interface StatusJson extends JsonObject {
  code: number;
  message: string;
  details: JsonObject[];
}

// Works for errors built on the server (details as {desc, value}) and for errors read back from a call (details
// as {type, value: bytes}). Connect's Code numbers are google.rpc.Code numbers.
export function connectErrorToStatusJson(error: ConnectError): StatusJson {
  const details = error.details.map((d) => {
    if ("desc" in d) {
      const value = toBinary(d.desc, create(d.desc, d.value));
      return anyToRestJson({ typeUrl: `type.googleapis.com/${d.desc.typeName}`, value });
    }
    return anyToRestJson({ typeUrl: `type.googleapis.com/${d.type}`, value: d.value });
  });
  return { code: error.code, message: error.rawMessage, details };
}

// The standard HTTP status of the code, except for three reasons of the REST layer that have their own: a body
// over the limit (413), a request head over the limit (431) and a known path with another method (405).
export function httpStatusOfError(error: ConnectError): number {
  const reason = error.findDetails(ErrorInfoSchema)[0]?.reason;
  if (error.code === Code.ResourceExhausted && reason === "REQUEST_TOO_LARGE") return 413;
  if (error.code === Code.ResourceExhausted && reason === "REQUEST_HEAD_TOO_LARGE") return 431;
  if (error.code === Code.Unimplemented && reason === "METHOD_NOT_ALLOWED") return 405;
  return codeToHttpStatus(error.code);
}

// Whole seconds of the RetryInfo detail, rounded up, for a Retry-After header; undefined when the error is not
// one to retry later or has no RetryInfo.
export function retryAfterSeconds(error: ConnectError): number | undefined {
  if (error.code !== Code.ResourceExhausted && error.code !== Code.Unavailable) return undefined;
  const delay = error.findDetails(RetryInfoSchema)[0]?.retryDelay;
  if (delay === undefined) return undefined;
  const seconds = Number(delay.seconds) + (delay.nanos > 0 ? 1 : 0);
  return Math.max(0, seconds);
}
