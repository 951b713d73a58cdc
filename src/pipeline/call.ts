import type { DescMethod, Message } from "@bufbuild/protobuf";
import { newRequestId } from "../shared/request-ids.js";
import type { MethodEntry } from "./method-table.js";

// The protocol a call arrived on. Stages may read it (the log line, metrics); they never branch their decisions
// on it, so that every protocol is treated alike.
export type Protocol = "grpc" | "grpc-web" | "connect" | "rest" | "vcd";

// Request headers or metadata, whichever protocol carried them; names are lower case.
export interface HeaderSource {
  get(name: string): string | null | undefined;
}

// The credentials as the caller sent them, read by the credentials stage. Nothing here is verified yet: the
// access-control stage decides what they are worth.
export interface Credentials {
  // The token of `Authorization`, with or without its "Bearer " prefix (the documents show both).
  token: string | undefined;
  apiKey: string | undefined;
  workspaceId: string | undefined;
}

// Where the caller's address is read, when a stage needs it (failed authentications are counted per address).
export interface AddressSource {
  readonly remoteAddress?: string | undefined;
}

export interface ClosingPeer {
  once(event: "close", listener: () => void): unknown;
}

const NO_CREDENTIALS: Credentials = { token: undefined, apiKey: undefined, workspaceId: undefined };

// A caller-supplied request id is kept when it is short and plain, so that logs of both sides line up; anything
// else is replaced rather than echoed into our logs and responses.
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdOf(given: string | null | undefined): string {
  return given !== null && given !== undefined && CALLER_REQUEST_ID.test(given) ? given : newRequestId();
}

// One call as the pipeline sees it, whatever protocol carried it. Adapters create it; stages read and fill it;
// handlers read the caller's identity and the signal from it. A class with plain fields (not a bag of closures):
// the gRPC adapter creates one per call on its hot path.
export class Call {
  readonly method: DescMethod;
  readonly requestId: string;
  // performance.now() at the start of the call: when its headers arrived, where the adapter knows it.
  readonly started: number;
  // performance.now() by which the call must end, set by the deadline stage; undefined: no deadline.
  deadline: number | undefined = undefined;
  credentials: Credentials = NO_CREDENTIALS;
  // Who the caller is (a principal id), once the authentication stage has established it.
  principal = "anonymous";
  // The scope the access check was made on ("kms-namespace:team-a"), for the audit trail.
  scope = "";
  // Response headers added by stages, written by the adapter on success and on failure alike.
  responseHeaders: [string, string][] | null = null;
  // Whether the handler returned (not threw, not a promise): it has then done with the request, whatever the
  // stages after it still wait for. The gRPC adapter reuses the buffer of such a call's request body (body-pool.ts).
  handlerReturned = false;
  // Whether the call was answered without waiting for its handler (its deadline passed): the handler may still be
  // running, and reading the request.
  abandoned = false;
  #abort: AbortController | null = null;

  constructor(
    readonly entry: MethodEntry,
    readonly protocol: Protocol,
    // The decoded request; for Connect's streaming calls, an empty message (the stream is Connect's).
    readonly request: Message,
    readonly headers: HeaderSource,
    // The id the adapter already gave the request (REST answers refusals before the call with it); null: read
    // from x-request-id.
    requestId: string | null,
    // What closes when the caller goes away (the HTTP/2 stream, the REST response): watched only for calls whose
    // handler asks for the signal, so most calls never add a listener, and the adapter allocates nothing for it.
    private readonly peer: ClosingPeer | null,
    // The caller's socket (for HTTP/2, the session's), read only when a stage asks for the address.
    private readonly addressSource: AddressSource | null,
    // Connect provides a signal of its own for the calls it serves.
    private readonly givenSignal: AbortSignal | null = null,
    // When the request arrived (its headers), where the adapter read the body before making the call; else now.
    started: number | null = null,
  ) {
    this.method = entry.method;
    this.requestId = requestId ?? requestIdOf(headers.get("x-request-id"));
    this.started = started ?? performance.now();
  }

  // The caller's IP address; "unknown" when the socket is already gone.
  get peerAddress(): string {
    return this.addressSource?.remoteAddress ?? "unknown";
  }

  // Aborted when the caller goes away or the deadline passes; created on first use.
  get signal(): AbortSignal {
    if (this.givenSignal !== null) return this.givenSignal;
    if (this.#abort === null) {
      const controller = new AbortController();
      this.#abort = controller;
      this.peer?.once("close", () => controller.abort());
    }
    return this.#abort.signal;
  }

  // Whether the caller has gone away, where its protocol tells it without a listener: Connect's signal, for the calls
  // Connect serves (the streaming ones among them).
  get callerGone(): boolean {
    return this.givenSignal?.aborted === true;
  }

  // Ends the handler's wait (the deadline stage calls this when the deadline passes).
  abort(): void {
    this.abandoned = true;
    this.#abort?.abort();
  }

  addResponseHeader(name: string, value: string): void {
    (this.responseHeaders ??= []).push([name, value]);
  }
}
