import { Code, ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "../../src/transport/connect/connect-internals.js";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { encodeGrpcMessage, grpcStatusHeaders } from "../../src/transport/grpc/grpc-status.js";

describe("encodeGrpcMessage", () => {
  it("keeps printable ASCII, including the characters Connect would escape", () => {
    expect(encodeGrpcMessage("parentId: is required; page.limit (1001) > 1000, see /v1/keys?x=1&y=[2]")).toBe(
      "parentId: is required; page.limit (1001) > 1000, see /v1/keys?x=1&y=[2]",
    );
  });

  it("escapes %, control characters and every byte of non-ASCII UTF-8", () => {
    expect(encodeGrpcMessage("100% done\nключ ü")).toBe("100%25 done%0A%D0%BA%D0%BB%D1%8E%D1%87 %C3%BC");
  });

  it("is undone by decodeURIComponent, as Connect and other clients decode it", () => {
    const message = "a: b % ключ\t✓";
    expect(decodeURIComponent(encodeGrpcMessage(message))).toBe(message);
  });

  it("writes a lone surrogate as U+FFFD and keeps a pair as its character", () => {
    expect(encodeGrpcMessage("a\ud83d b\ude00 😀")).toBe("a%EF%BF%BD b%EF%BF%BD %F0%9F%98%80");
  });
});

describe("grpcStatusHeaders", () => {
  it("carries code, message and details, and none of the error's metadata", () => {
    const error = new ConnectError("key: not found", Code.NotFound, { "x-request-id": "r1" }, [
      { desc: ErrorInfoSchema, value: { reason: "CRYPTO_KEY_NOT_FOUND", domain: "kms" } },
    ]);
    const headers = grpcStatusHeaders(error);
    expect([...headers.keys()].sort()).toEqual(["grpc-message", "grpc-status", "grpc-status-details-bin"]);
    expect(headers.get("grpc-status")).toBe("5");
    expect(headers.get("grpc-message")).toBe("key: not found");
    const decoded = findTrailerError(headers);
    expect(decoded?.rawMessage).toBe("key: not found");
    expect(decoded?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("CRYPTO_KEY_NOT_FOUND");
  });

  // JSON.parse quotes the UTF-16 unit it stopped at: half of "😀". Connect's setTrailerStatus throws URIError on
  // such a message; ours answers it, with U+FFFD for the lone half in both grpc-message and the details.
  it("answers a message with lone surrogates, well-formed in grpc-message and grpc-status-details-bin", () => {
    const error = new ConnectError("Unexpected token '\ud83d', \"😀\" is not valid JSON; cut \udc00", Code.InvalidArgument, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "MALFORMED_BODY", domain: "kms" } },
    ]);
    const headers = grpcStatusHeaders(error);
    expect(headers.get("grpc-status")).toBe("3");
    expect(headers.get("grpc-message")).toBe("Unexpected token '%EF%BF%BD', \"%F0%9F%98%80\" is not valid JSON; cut %EF%BF%BD");
    const expected = "Unexpected token '\ufffd', \"😀\" is not valid JSON; cut \ufffd";
    expect(decodeURIComponent(headers.get("grpc-message") ?? "")).toBe(expected);
    expect(findTrailerError(headers)?.rawMessage).toBe(expected);
  });
});
