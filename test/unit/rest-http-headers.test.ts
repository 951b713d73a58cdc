import { expect, test } from "vitest";
import { forwardRequestHeaders, responseHeadersOf } from "../../src/transport/rest/http-headers.js";

test("the caller's headers reach the call without framing, hop-by-hop or protocol headers but the deadline stage's timeout", () => {
  const forwarded = forwardRequestHeaders({
    ":path": "/v1/keys",
    host: "example.com",
    authorization: "Bearer t",
    "x-api-key": "k",
    "x-request-id": "r1",
    "content-type": "application/json",
    "content-length": "12",
    "accept-encoding": "gzip",
    connection: "keep-alive",
    te: "trailers",
    "connect-timeout-ms": "1",
    "grpc-timeout": "1S",
    "x-multi": ["a", "b"],
  });
  expect([...forwarded]).toEqual([
    ["authorization", "Bearer t"],
    ["grpc-timeout", "1S"],
    ["x-api-key", "k"],
    ["x-multi", "a, b"],
    ["x-request-id", "r1"],
  ]);
});

test("without grpc-timeout, connect-timeout-ms is the caller's deadline, and other Connect headers stay behind", () => {
  const forwarded = forwardRequestHeaders({ "connect-timeout-ms": "-1", "connect-protocol-version": "1", "grpc-encoding": "gzip" });
  expect([...forwarded]).toEqual([["connect-timeout-ms", "-1"]]);
});

test("handler headers and trailers go back without Connect's own", () => {
  const header = new Headers({
    "content-type": "application/proto",
    "content-encoding": "gzip",
    "connect-content-encoding": "gzip",
    "x-request-id": "r1",
    "x-ratelimit-remaining": "9",
  });
  const trailer = new Headers({ "grpc-status": "0", "x-ratelimit-remaining": "8", "retry-after": "3" });
  expect(responseHeadersOf(header, trailer)).toEqual(
    new Map([
      ["x-ratelimit-remaining", ["9", "8"]],
      ["x-request-id", ["r1"]],
      ["retry-after", ["3"]],
    ]),
  );
});
