import type http2 from "node:http2";
import type fc from "fast-check";
import {
  ADMIN_AUTHORIZATION,
  buildBody,
  buildEnvelope,
  buildGrpcWebBody,
  buildPath,
  buildQuery,
  buildRestBody,
  connectPlanArb,
  grpcPlanArb,
  grpcWebPlanArb,
  h1Method,
  restPlanArb,
  validGrpcPlanArb,
} from "./arbitraries.js";
import type { ConnectPlan, GrpcPlan, GrpcWebPlan, HeaderPlan, RestPlan } from "./arbitraries.js";
import { base64Segments, connectVerdict, grpcVerdict, grpcWebVerdict, restVerdict } from "./verdicts.js";
import type { Sent, Verdict } from "./verdicts.js";
import { describeAnswer, fetchAnswer } from "./wire.js";
import type { Answer, H2Client, Headers1 } from "./wire.js";

// The properties, each an arbitrary of request plans and a function that sends one plan to a server and judges
// the answer. The vitest files (test/property/*.test.ts) check them a bounded number of times on both call paths;
// `npm run fuzz -- --properties` runs them for a million inputs.

export interface Target {
  url: string;
  h2: H2Client;
  timeoutMs: number;
  // "Bearer <token>" of the server's admin, sent where a plan says ADMIN_AUTHORIZATION, with the admin's API key
  // and its workspace, which the configuration calls need besides the token (CONTRACT section 6).
  authorization: string;
  apiKey: string;
  workspaceId: string;
}

export interface Outcome {
  // Null when the answer is fine.
  failure: Verdict;
  // The call completed (HTTP 2xx, grpc-status 0): it may have changed the store.
  succeeded: boolean;
  // What was sent and what came back, to explain a failure.
  sent: string;
  answer: string;
}

export interface PropertySpec<T> {
  name: string;
  arbitrary(known: readonly string[]): fc.Arbitrary<T>;
  run(target: Target, input: T): Promise<Outcome>;
}

function present(headers: HeaderPlan, target: Target): Headers1 {
  const out: Headers1 = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === ADMIN_AUTHORIZATION) {
      out[name] = target.authorization;
      if (target.apiKey !== "") Object.assign(out, { "x-api-key": target.apiKey, "x-workspace-id": target.workspaceId });
    }
    else if (value !== undefined) out[name] = value;
  }
  return out;
}

const SERVICE_AUTH = /service_auth|ServiceAuth/i;

// The call carries the admin's token and no other credential, and does not ask for a token (ServiceAuth judges the
// client id and secret of its body, and answers UNAUTHENTICATED for wrong ones whoever calls).
function asAdmin(headers: HeaderPlan, path: string): boolean {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // Malformed escapes: judged on the path as it is.
  }
  return headers["authorization"] === ADMIN_AUTHORIZATION && headers["x-api-key"] === undefined && !SERVICE_AUTH.test(decoded);
}

// Node's HTTP/2 client sends :path as given; what it cannot carry (controls, non-ASCII) is percent-encoded first.
function h2Path(path: string): string {
  return path.replace(/[^\x21-\x7e]/gu, (c) => encodeURIComponent(c));
}

function shown(method: string, path: string, headers: Headers1, body: Buffer, http2: boolean): string {
  const prefix = body.subarray(0, 64).toString("hex");
  return `${http2 ? "h2" : "h1"} ${method} ${path.length > 200 ? `${path.slice(0, 200)}...(${path.length})` : path} ${JSON.stringify(headers)} body(${body.length})=${prefix}`;
}

interface Exchange {
  answer: Answer;
  // For the verdict.
  sent: Sent;
  // For a failure report.
  shown: string;
}

// `admin`: the call carries the admin's credentials alone (asAdmin), so that its verdict may not be a refusal of them.
async function send(target: Target, http2: boolean, method: string, path: string, headers: Headers1, body: Buffer, admin: boolean): Promise<Exchange> {
  if (http2) {
    const h: http2.OutgoingHttpHeaders = { ":method": method, ":path": h2Path(path), ...headers };
    return { answer: await target.h2.request(h, body), sent: { headers, http2, bodyBytes: body.length, asAdmin: admin }, shown: shown(method, h2Path(path), headers, body, true) };
  }
  // fetch sends no body with GET or HEAD.
  const sentBody = method === "GET" || method === "HEAD" ? Buffer.alloc(0) : body;
  const answer = await fetchAnswer(`${target.url}${path}`, method, headers, sentBody, target.timeoutMs);
  return { answer, sent: { headers, http2, bodyBytes: sentBody.length, asAdmin: admin }, shown: shown(method, path, headers, sentBody, false) };
}

function grpcSucceeded(answer: Answer): boolean {
  return answer.kind === "answer" && (answer.trailers["grpc-status"] ?? answer.headers["grpc-status"]) === "0";
}

function outcome(failure: Verdict, succeeded: boolean, sent: string, answer: Answer): Outcome {
  return { failure, succeeded, sent, answer: describeAnswer(answer) };
}

async function runGrpc(target: Target, plan: GrpcPlan): Promise<Outcome> {
  const headers = { "content-type": plan.contentType, ...present(plan.headers, target) };
  const { answer, sent, shown } = await send(target, true, "POST", plan.target.path, headers, buildEnvelope(plan.envelope), asAdmin(plan.headers, plan.target.path));
  return outcome(grpcVerdict(answer, sent), grpcSucceeded(answer), shown, answer);
}

export const grpcEnvelopes: PropertySpec<GrpcPlan> = {
  name: "grpc",
  arbitrary: (known) => grpcPlanArb(known),
  run: runGrpc,
};

export const grpcMessages: PropertySpec<GrpcPlan> = {
  name: "grpc-messages",
  arbitrary: (known) => validGrpcPlanArb(known),
  run: runGrpc,
};

export const grpcWeb: PropertySpec<GrpcWebPlan> = {
  name: "grpc-web",
  arbitrary: (known) => grpcWebPlanArb(known),
  async run(target, plan) {
    const headers: Headers1 = { "content-type": plan.contentType, ...(plan.xGrpcWeb ? { "x-grpc-web": "1" } : {}), ...present(plan.headers, target) };
    // HTTP/1.1 has no trailers and no TE: trailers.
    if (!plan.http2) delete headers["te"];
    const { answer, sent, shown } = await send(target, plan.http2, "POST", plan.target.path, headers, buildGrpcWebBody(plan), asAdmin(plan.headers, plan.target.path));
    // The text form's answer is judged on the frames its base64 holds.
    const text = plan.contentType.startsWith("application/grpc-web-text");
    const frames = answer.kind === "answer" && text && answer.status === 200 ? base64Segments(answer.body) : answer.kind === "answer" ? answer.body : undefined;
    const status = answer.kind === "answer" ? (answer.headers["grpc-status"] ?? /grpc-status:\s*(\d+)/.exec(frames?.toString("latin1") ?? "")?.[1]) : undefined;
    return outcome(grpcWebVerdict(answer, sent, text, frames), status === "0", shown, answer);
  },
};

export const connectUnary: PropertySpec<ConnectPlan> = {
  name: "connect",
  arbitrary: (known) => connectPlanArb(known),
  async run(target, plan) {
    const headers: Headers1 = { "content-type": plan.contentType, ...present(plan.headers, target) };
    if (plan.body.kind === "compressed" && headers["content-encoding"] === undefined) headers["content-encoding"] = plan.body.with;
    const body = buildBody(plan.target.method.input, plan.body);
    const { answer, sent, shown } = await send(target, plan.http2, plan.httpMethod, plan.target.path, headers, body, asAdmin(plan.headers, plan.target.path));
    const succeeded = answer.kind === "answer" && answer.status === 200;
    return outcome(connectVerdict(answer, sent, plan.httpMethod, plan.contentType), succeeded, shown, answer);
  },
};

export const rest: PropertySpec<RestPlan> = {
  name: "rest",
  arbitrary: (known) => restPlanArb(known),
  async run(target, plan) {
    const path = buildPath(plan.path) + buildQuery(plan.query);
    const headers: Headers1 = present(plan.credentials, target);
    if (plan.contentType !== undefined) headers["content-type"] = plan.contentType;
    if (plan.contentEncoding !== undefined) headers["content-encoding"] = plan.contentEncoding;
    const method = plan.http2 ? plan.httpMethod : h1Method(plan.httpMethod);
    const { answer, sent, shown } = await send(target, plan.http2, method, path, headers, buildRestBody(plan), asAdmin(plan.credentials, path));
    const succeeded = answer.kind === "answer" && answer.status >= 200 && answer.status < 300;
    return outcome(restVerdict(answer, sent, method), succeeded, shown, answer);
  },
};

export const allProperties: PropertySpec<unknown>[] = [rest, grpcEnvelopes, grpcMessages, grpcWeb, connectUnary];
