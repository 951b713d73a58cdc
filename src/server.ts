import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import type { Duplex } from "node:stream";
import type { NodeRequest, NodeResponse } from "./transport/node-types.js";
import type { Logger } from "pino";
import type { Catalog } from "./compute/catalog/catalog.js";
import { loadCatalog } from "./compute/catalog/load-catalog.js";
import { computeJsonRegistry, createComputeModule } from "./compute/compute-module.js";
import { TaskRetention } from "./compute/tasks/task-retention.js";
import type { Config } from "./config.js";
import { createCryptoHandlers } from "./kms/crypto-handlers.js";
import { KeyCache } from "./kms/key-cache.js";
import { KeyManager } from "./kms/key-manager.js";
import { cryptoEncoders } from "./kms/crypto-encoders.js";
import { createKmsService } from "./kms/kms-service.js";
import { loadMasterKey, refuseOtherMasterKey } from "./kms/master-key-source.js";
import { Sweeper } from "./kms/sweeper.js";
import { CallTallies } from "./metrics/call-tally.js";
import { createMetricsRegistry } from "./metrics/metrics-registry.js";
import { MethodTable } from "./pipeline/method-table.js";
import type { Stage } from "./pipeline/stage.js";
import { pipelineStages } from "./pipeline/stages.js";
import { MemoryRateLimiter } from "./ratelimit/memory-rate-limiter.js";
import type { RateLimiter } from "./ratelimit/rate-limits.js";
import { RedisRateLimiter } from "./ratelimit/redis-rate-limiter.js";
import { infrastructureServices, longLivedPaths, registerRoutes, servedServices } from "./routes.js";
import type { Clock } from "./shared/clock.js";
import { packageRoot } from "./shared/package-root.js";
import type { Storage } from "./storage/storage.js";
import { systemClock } from "./shared/clock.js";
import { AccessPolicy } from "./identity/access-policy.js";
import { AccessWatcher } from "./identity/access-watcher.js";
import { AuditRetention } from "./identity/audit-retention.js";
import { AuditTrail } from "./identity/audit-trail.js";
import { createAuthService } from "./identity/auth-service.js";
import { Authenticator } from "./identity/authenticator.js";
import { bootstrapAdmin, refuseStrayAdminCredentials } from "./identity/bootstrap.js";
import { IdentityAdmin } from "./identity/identity-admin.js";
import { keyNotFound } from "./kms/key-manager.js";
import { openStorage } from "./storage/open-storage.js";
import { applyCors } from "./transport/cors.js";
import { HealthStatus } from "./transport/grpc/health-service.js";
import { BODY_POOL_IDLE_BYTES, BodyPool } from "./transport/grpc/body-pool.js";
import { GrpcUnaryAdapter } from "./transport/grpc/grpc-unary-adapter.js";
import { createConnectAdapter } from "./transport/connect/connect-adapter.js";
import { answerUnknownProcedure, unknownProcedureAnswer } from "./transport/connect/unknown-procedure.js";
import { serverShuttingDown } from "./errors/protocol-errors.js";
import { requestIdOf } from "./pipeline/call.js";
import { createCleartextListener } from "./transport/listener.js";
import { limitTlsFirstBytes } from "./transport/tls-first-bytes.js";
import { LongLivedCalls } from "./transport/long-lived-calls.js";
import { releaseUnreadBody } from "./transport/unread-body.js";
import { serveDespiteExpectation } from "./transport/expectation.js";
import { hasRepeatedCredentials, refuseRepeatedCredentials } from "./transport/repeated-credentials.js";
import { applyHttp1Limits, closeWhenIdle, holdSessionOpen, http1Options } from "./transport/connection-limits.js";
import type { ConnectionLimits } from "./transport/connection-limits.js";
import { FairTurns } from "./transport/fair-turns.js";
import { RequestTimeouts } from "./transport/request-timeout.js";
import { countPeerResets } from "./transport/reset-flood.js";
import { waitsForTurn } from "./transport/pipelined-requests.js";
import { UnsentOutput } from "./transport/unsent-output.js";
import { createRestHandler } from "./transport/rest/rest-handler.js";
import { createStaticFiles } from "./transport/static-files.js";
import { createMetricsEndpoint } from "./transport/metrics-endpoint.js";
import { createVcdHandler } from "./transport/vcd/vcd-handler.js";
import { BodyBudget } from "./transport/limits/body-budget.js";
import { isVcdPath } from "./transport/vcd/vcd-paths.js";
import { RouteTable } from "./transport/rest/route-table.js";
import { http2HeadRefusal, refuseRequestTarget } from "./transport/rest/request-target.js";
import { ANNOUNCED_HEADER_LIST_BYTES, MAX_HEAD_FIELDS } from "./transport/http2-head-size.js";
import { answerParserRefusal } from "./transport/rest/parser-refusals.js";
import { socketsClosed } from "./transport/sockets-closed.js";
import type { ParserError } from "./transport/rest/parser-refusals.js";

export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
const FAIR_TURN_BUDGET_MS = 8;
// How long a graceful close waits for open watches to write their end before their connections are dropped.
const LONG_LIVED_END_MS = 1000;
// How long a graceful close leaves connections open for a request already on its way (see close()).
const IDLE_CONNECTION_GRACE_MS = 1000;

// HTTP/2 flow control: Node's 65,535-byte default windows stall a 64 KiB Encrypt until a WINDOW_UPDATE comes
// back. These let a full request through at once and keep many concurrent streams busy.
const H2_STREAM_WINDOW = 1 << 20;
const H2_CONNECTION_WINDOW = 16 << 20;

export interface App {
  listen(): Promise<number>;
  close(): Promise<void>;
  readonly manager: KeyManager;
  readonly sweeper: Sweeper;
  readonly health: HealthStatus;
  // Administration of principals, credentials and grants on this server's store; its changes apply at once.
  readonly identity: IdentityAdmin;
}

export interface BuildOptions {
  clock?: Clock;
  // Tests only: stages added to the end of the pipeline (a probe that records every call).
  extraStages?: Stage[];
}

// How long the database may go unheard before /readyz says so: longer than a busy event loop delays a heartbeat.
const STORE_LOST_NOT_READY_MS = 5000;

type Req = NodeRequest;
type Res = NodeResponse;

// Builds the whole server without listening: storage, domain, every protocol on one handler. main.ts and
// the tests both call this. Refuses (rejects) before anything listens when the store or the master key is wrong.
export async function build(config: Config, logger: Logger, options: BuildOptions = {}): Promise<App> {
  const clock = options.clock ?? systemClock;
  // Read before the store is opened: a catalog the server cannot use stops the start before anything is written to
  // the data directory (a probe found a new master key and database made by a start that then failed on it).
  const catalog = loadCatalog(config.catalogFile);
  const storage = await openStorage(config, logger, "server", (reader) => refuseOtherMasterKey(config, reader));
  try {
    return await assemble(config, logger, options, clock, storage, catalog);
  } catch (err) {
    await storage.close();
    throw err;
  }
}

async function assemble(config: Config, logger: Logger, options: BuildOptions, clock: Clock, storage: Storage, catalog: Catalog): Promise<App> {
  const store = storage.kms;
  await storage.exclusively(() => refuseStrayAdminCredentials(storage.identity, config));
  const masterKey = await storage.exclusively(() => loadMasterKey(config, store, logger));
  const keyCache = new KeyCache(masterKey, config.keyCacheSize);
  const manager = new KeyManager(store, keyCache, masterKey, clock, {
    destroyGraceMs: config.destroyGraceMs,
  });
  const crypto = createCryptoHandlers(manager);
  const sweeper = new Sweeper(manager, config.sweepIntervalMs, logger);
  const health = new HealthStatus();
  const shutdown = new AbortController();
  // Aborted when close() begins: /readyz answers 503, new calls are refused (the pipeline's shutdown stage) and
  // HTTP/1.1 answers ask for their connection to be closed.
  const draining = new AbortController();
  // Connect links every call's signal to this one, so it has as many listeners as there are calls in flight.
  setMaxListeners(0, shutdown.signal);
  const compute = createComputeModule({
    store: storage.compute,
    vapps: storage.vapps,
    ledger: storage.ledger,
    clock,
    logger,
    catalog,
    providerDelayMs: config.providerDelayMs,
    taskConcurrency: config.taskConcurrency,
  });
  const taskRetention = new TaskRetention({ nodePools: storage.compute, vapps: storage.vapps }, clock, config.taskRetentionMs, config.sweepIntervalMs, logger);

  const identityStore = storage.identity;
  // Rate limits: counted in this process's memory, or in Redis when REDIS_URL is set so that every server shares them;
  // failed authentications are counted in the same store.
  const limiter: RateLimiter =
    config.redisUrl === ""
      ? new MemoryRateLimiter(config.rateLimits)
      : new RedisRateLimiter(config.redisUrl, config.rateLimits, config.rateLimitKeyPrefix, logger);
  const authenticator = new Authenticator(identityStore, clock, {
    tokenTtlMs: config.accessTokenTtlMs,
    failuresPerMinute: config.authFailuresPerMinute,
    failureCounts: limiter.failureCounts,
    // Where a block of an address or client id for failed authentications is told (once each, at warn).
    logger,
  });
  const access = new AccessPolicy(identityStore);
  const accessWatcher = new AccessWatcher(identityStore, authenticator, access, clock, logger);
  const identity = new IdentityAdmin(identityStore, clock, () => accessWatcher.dropCaches());
  await storage.exclusively(() => bootstrapAdmin(identity, config.dataDir, logger));
  const audit = new AuditTrail(storage.audit, logger);
  // Since when the change feed has not heard the database (PostgreSQL; null while it does, and always on the embedded
  // store): /readyz answers 503 once that has lasted STORE_LOST_NOT_READY_MS, so that a balancer sends calls to
  // servers that can serve them. It stayed 200 while no call could succeed (a probe of outages, 2026-11-28).
  let storeLostAt: number | null = null;
  const auditRetention = new AuditRetention(storage.audit, clock, config.auditRetentionMs, config.sweepIntervalMs, logger);
  // Other servers' changes on a shared store: the caches follow them (storage.ts).
  await storage.watch({
    keyChanged: (keyId) => keyCache.evict(keyId),
    accessChanged: () => accessWatcher.dropCaches(),
    taskStored: () => compute.kick(),
    taskFinished: (taskId) => compute.taskFinished(taskId),
    feedLive: (live) => {
      keyCache.trust(live);
      storeLostAt = live ? null : (storeLostAt ?? performance.now());
    },
  });

  // Every call of every protocol runs through these stages (src/pipeline/stages.ts).
  const served = servedServices({
    auth: createAuthService(authenticator),
    kms: createKmsService(manager, crypto, clock, { minRotationMs: config.minRotationMs }),
    configs: compute.configService,
    nodePools: compute.nodePoolService,
    tasks: compute.taskService,
    vapps: compute.vappService,
  });
  if (config.pipelineStages !== "all") {
    logger.warn(`PIPELINE_STAGES=${config.pipelineStages}: calls run without ${config.pipelineStages === "none" ? "request ids, deadlines, credentials or audit" : "authentication or authorization: every caller may do everything"}; for benchmarks only`);
  }
  const callTallies = config.metrics === "off" ? null : new CallTallies();
  const stages = pipelineStages({
    logger,
    clock,
    maxCallMs: config.maxCallMs,
    mode: config.pipelineStages,
    access: { authenticator, policy: access, keyScopes: { namespaceOfKey: (keyId) => manager.namespaceOf(keyId), keyNotFound }, vappScopes: compute.vappScopes },
    audit,
    metrics: callTallies,
    rateLimits: { limiter, limits: config.rateLimits, services: config.rateLimitServices, onStoreFailure: config.rateLimitStoreFailure },
    draining: draining.signal,
    extra: options.extraStages ?? [],
  });
  const table = new MethodTable(served, infrastructureServices, stages);
  const longLived = longLivedPaths(table);
  const direct = config.callPath === "direct";
  const bodyBudget = new BodyBudget(config.maxBufferedRequestBytes);
  const grpc = direct ? new GrpcUnaryAdapter(table, cryptoEncoders(table), logger, MAX_REQUEST_BYTES, bodyBudget, new BodyPool(BODY_POOL_IDLE_BYTES)) : null;

  // Starts and ends of Connect-served calls, and request timeouts, run while the turn of the event loop has taken
  // less than this (fair-turns.ts): each costs up to about 1 ms, so a turn stays near 10 ms whatever arrives at once.
  const turns = new FairTurns(FAIR_TURN_BUDGET_MS, (err) => logger.warn({ err }, "dropped a call after an error while serving it"));
  const connect = createConnectAdapter({
    table,
    routes: (r) => registerRoutes(r, served, health),
    // Connect JSON needs the types packed into google.protobuf.Any (task metadata, response, error details).
    jsonOptions: { registry: computeJsonRegistry, ignoreUnknownFields: false },
    readMaxBytes: MAX_REQUEST_BYTES,
    turns,
    bodyBudget,
    shutdownSignal: shutdown.signal,
    fallback,
    logger,
  });
  const restRoutes = new RouteTable(table);
  const rest = createRestHandler({
    routes: restRoutes,
    maxBodyBytes: MAX_REQUEST_BYTES,
    bodyBudget,
    logger,
    viaConnect: direct ? null : connect.handlers,
  });

  const metrics =
    callTallies === null
      ? null
      : createMetricsEndpoint({
          registry: createMetricsRegistry({ calls: callTallies, keyCache, taskQueue: compute.taskQueue, clock }),
          access: config.metrics === "open" ? "open" : "admin",
          authenticator,
          policy: access,
          logger,
        });

  // Published with the project: the OpenAPI document of the REST surface (npm run generate), and the operator
  // console that `npm run build` bundles (console/, docs/callers.md).
  const root = packageRoot();
  const staticFiles = createStaticFiles(
    [
      { urlPaths: ["/openapi.json"], file: join(root, "openapi", "openapi.json"), contentType: "application/json" },
      { urlPaths: ["/console", "/console/"], file: join(root, "dist", "console", "index.html"), contentType: "text/html; charset=utf-8", optional: true },
      { urlPaths: ["/console/console.js"], file: join(root, "dist", "console", "console.js"), contentType: "text/javascript; charset=utf-8", optional: true },
    ],
    (file) => logger.warn(`${file} is missing, so /console is not served: run npm run build`),
  );

  const vcd = createVcdHandler({ table, supportedVersions: config.vcdApiVersions, bodyBudget, logger });

  // Not async: the REST handler catches whatever its call throws, so there is nothing left to await here.
  function fallback(req: Req, res: Res): void {
    if (req.method === "GET" || req.method === "HEAD") {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      if (staticFiles(req, res, path)) return;
      if (path === "/healthz" || path === "/readyz") {
        const storeLost = storeLostAt !== null && performance.now() - storeLostAt >= STORE_LOST_NOT_READY_MS;
        const status = path === "/healthz" ? "ok" : draining.signal.aborted ? "shutting down" : storeLost ? "store unreachable" : "ok";
        // Every response carries a request id (docs/errors.md), these too, which no call pipeline answers.
        res.writeHead(status === "ok" ? 200 : 503, { "content-type": "application/json", "x-request-id": requestIdOf(req.headers["x-request-id"]?.toString()) });
        res.end(JSON.stringify({ status }));
        return;
      }
      if (path === "/metrics" && metrics !== null) {
        res.setHeader("x-request-id", requestIdOf(req.headers["x-request-id"]?.toString()));
        void metrics(req, res);
        return;
      }
    }
    const url = req.url ?? "/";
    if (isVcdPath(url)) {
      void vcd(req, res);
      return;
    }
    if (req.method === "POST") {
      // Every REST POST comes here: the answer (and its request id) is made only for a request of an RPC protocol.
      const rpc = unknownProcedureAnswer(table, url, req.headers);
      if (rpc !== null) {
        answerUnknownProcedure(res, rpc);
        return;
      }
    }
    void rest(req, res);
  }

  let inFlight = 0;
  let drained: (() => void) | null = null;
  // One shared listener rather than a closure per call: the gRPC adapter counts every allocation.
  const untrack = (): void => {
    inFlight--;
    if (inFlight === 0) drained?.();
  };
  function track(call: { on(event: "close", listener: () => void): unknown }): void {
    inFlight++;
    call.on("close", untrack);
  }
  // Calls open by design (health watches, streaming reflection): they keep their HTTP/2 session from being closed as
  // idle, and a graceful close ends them with a status (below) instead of dropping their connections.
  const longLivedOpen = new Set<Res>();
  let longLivedEnded: (() => void) | null = null;
  const longLivedCalls = new LongLivedCalls(config);
  function trackLongLived(req: Req, res: Res): void {
    if ("stream" in req) holdSessionOpen(req.stream);
    longLivedOpen.add(res);
    res.once("close", () => {
      longLivedOpen.delete(res);
      if (longLivedOpen.size === 0) longLivedEnded?.();
    });
  }

  // The one request listener of both servers. Node calls it from its socket loop, where a throw would end the
  // process: whatever one request does wrong stays with that request.
  function handle(req: Req, res: Res): void {
    try {
      // A pipelined HTTP/1.1 request is served once the answers before it are out (pipelined-requests.ts).
      if (!("stream" in req) && waitsForTurn(req, res as http.ServerResponse, handle)) return;
      // First: a CORS preflight is answered (204) without reading its body too.
      releaseUnreadBody(req, res, MAX_REQUEST_BYTES);
      // An HTTP/1.1 target in absolute form is served as the path it names; a missing, repeated or malformed Host (or
      // HTTP/2 :authority), and an HTTP/2 head larger than HTTP/1.1 takes, are refused.
      if (refuseRequestTarget(req, res, restRoutes)) return;
      if (refuseRepeatedCredentials(req, res, restRoutes)) return;
      if (applyCors(config.corsAllowedOrigins, req, res)) return;
      // Draining: whatever this request gets, its HTTP/1.1 connection ends with it, so that the client takes its next
      // call to another server instead of sending it here to be refused.
      if (draining.signal.aborted && !("stream" in req)) res.setHeader("connection", "close");
      if (!longLived.has(req.url ?? "")) track(res);
      else if (longLivedCalls.admit(req, res)) trackLongLived(req, res);
      else return;
      connect.handle(req, res);
    } catch (err) {
      dropAfterFault(err, () => res.destroy());
    }
  }

  // A throw from code that serves one connection or stream: a fault of ours, or a peer that left between two
  // steps. Logged, and only that call is dropped.
  function dropAfterFault(err: unknown, drop: () => void): void {
    logger.warn({ err }, "dropped a call after an error while serving it");
    try {
      drop();
    } catch {
      // Already gone.
    }
  }

  // Node's HTTP/2 compatibility layer turns every stream into request and response objects through its own
  // "stream" listener. gRPC unary streams are served before that, so they never pay for those objects; every
  // other stream goes on to Node's listener unchanged.
  const requestTimeouts = new RequestTimeouts(config.requestTimeoutMs, turns);
  function serveGrpcUnaryFirst(server: http2.Http2Server | http2.Http2SecureServer): void {
    const compat = server.listeners("stream") as ((...args: unknown[]) => void)[];
    server.removeAllListeners("stream");
    // Node emits "stream" with exactly these four arguments; naming them spares a rest array per call.
    server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
      // Reset by the peer before Node announced it (rapid reset), or destroyed with its session: nothing to serve. A
      // session Node closes for a flood in the read that opened it (20,000 PINGs after a request's HEADERS) is
      // destroyed before its streams are announced, and Node then emits the session's error on each of them: a stream
      // nobody listened to ended the process, from one unauthenticated connection (a probe, 2026-11-28).
      if (stream.destroyed) {
        stream.on("error", ignoreStreamError);
        return;
      }
      try {
        if (!longLived.has(headers[":path"] ?? "")) requestTimeouts.limit(stream);
        // A stream whose head is refused, or which repeats a credential header, goes to the request listener, which
        // answers it (request-target.ts, repeated-credentials.ts).
        if (grpc !== null && http2HeadRefusal(headers, rawHeaders) === null && !hasRepeatedCredentials(rawHeaders) && grpc.tryServe(stream, headers)) {
          track(stream);
          return;
        }
        for (const listener of compat) listener.call(server, stream, headers, flags, rawHeaders);
      } catch (err) {
        dropAfterFault(err, () => stream.destroy());
      }
    });
  }

  // A stream's error has been dealt with by whoever destroyed it (the session, for its own reasons).
  function ignoreStreamError(): void {}

  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  const limits: ConnectionLimits = config;
  // Answers a connection holds unsent, on every protocol (unsent-output.ts).
  const unsentOutput = new UnsentOutput(limits, logger);
  const trackSession = (session: http2.Http2Session): void => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // A session can be gone before Node announces it (the peer left during the handshake).
    if (session.destroyed) return;
    session.setLocalWindowSize(H2_CONNECTION_WINDOW);
    closeWhenIdle(session, limits);
    unsentOutput.watchSession(session);
    countPeerResets(session);
  };
  // Heads over MAX_HEAD_BYTES reach the request listener, which refuses them with 431 on every stream alike; Node
  // reads enough fields for the size to decide (http2-head-size.ts).
  const h2Settings = { initialWindowSize: H2_STREAM_WINDOW, maxConcurrentStreams: config.http2MaxStreams, maxHeaderListSize: ANNOUNCED_HEADER_LIST_BYTES };
  const h2Options = { settings: h2Settings, maxHeaderListPairs: MAX_HEAD_FIELDS };

  let server: net.Server;
  let h1: http.Server | null = null;
  if (config.tlsCertFile !== "") {
    const secure = http2.createSecureServer(
      // noDelay: for HTTP/1.1 over TLS, as for cleartext (listener.ts); HTTP/2 sessions set it themselves.
      { cert: readFileSync(config.tlsCertFile), key: readFileSync(config.tlsKeyFile), allowHTTP1: true, ...h2Options, noDelay: true },
      handle,
    );
    applyHttp1Limits(secure, limits);
    limitTlsFirstBytes(secure, limits.headersTimeoutMs);
    secure.on("checkExpectation", serveDespiteExpectation(handle));
    secure.on("clientError", (err: ParserError, socket: Duplex) => answerParserRefusal(err, socket, restRoutes));
    secure.on("session", trackSession);
    serveGrpcUnaryFirst(secure);
    secure.on("connection", (socket: net.Socket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
    server = secure;
  } else {
    h1 = http.createServer(http1Options(limits), handle);
    h1.on("clientError", (err: ParserError, socket: Duplex) => answerParserRefusal(err, socket, restRoutes));
    h1.on("checkExpectation", serveDespiteExpectation(handle));
    // h1 never listens itself (the listener hands it its connections), and Node starts checking the header and
    // request timeouts of its connections only on "listening".
    h1.emit("listening");
    const h2 = http2.createServer(h2Options, handle);
    h2.on("session", trackSession);
    h2.on("checkExpectation", serveDespiteExpectation(handle));
    serveGrpcUnaryFirst(h2);
    server = createCleartextListener(h1, h2, sockets, {
      firstBytesTimeoutMs: limits.headersTimeoutMs,
      maxConnections: limits.maxConnections,
    });
  }

  // The HTTP/1.1 connections: those the cleartext listener hands h1, or those ALPN gives HTTP/1.1 over TLS.
  if (h1 !== null) unsentOutput.watchHttp1(h1);
  else unsentOutput.watchHttp1OverTls(server);

  return {
    manager,
    sweeper,
    health,
    identity,
    async listen() {
      // The first calls are counted in Redis, not refused or let through because it was not connected yet.
      await limiter.ready();
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(config.port, config.host, () => {
          server.off("error", reject);
          sweeper.start();
          auditRetention.start();
          taskRetention.start();
          compute.start();
          accessWatcher.start();
          unsentOutput.start();
          const address = server.address();
          resolve(typeof address === "object" && address !== null ? address.port : config.port);
        });
      });
    },
    // Graceful: stop accepting, let in-flight calls finish (up to the shutdown timeout), end open streams,
    // then close the store.
    async close() {
      draining.abort();
      health.shutdown();
      // First, so that WaitTask calls return now instead of holding up the drain below. Its failure (the store refusing
      // the worker's last writes: a full disk) is reported at the end: left unhandled meanwhile, it ended the process
      // with exit 1 before the drain, the audit trail's last batch and the store's close (a probe, 2026-11-28).
      const computeStopped = compute.stop().then(
        () => null,
        (err: unknown) => ({ err }),
      );
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.close();
      if (inFlight > 0) {
        await new Promise<void>((resolve) => {
          drained = resolve;
          setTimeout(resolve, config.shutdownTimeoutMs).unref();
        });
      }
      // Open watches have NOT_SERVING to send (health.shutdown above): a turn for it to go out, then their calls end
      // with UNAVAILABLE, so that a balancer watching learns the server drains from the watch itself, not from a
      // dropped connection (a probe, 2026-11-27), and a second for the end to be written before the sockets go.
      await new Promise((resolve) => setImmediate(resolve));
      shutdown.abort(serverShuttingDown("cloudplane"));
      if (longLivedOpen.size > 0) {
        await new Promise<void>((resolve) => {
          longLivedEnded = resolve;
          setTimeout(resolve, LONG_LIVED_END_MS).unref();
        });
        // A stream is closed before its session has written its last frames: the sessions, told to close above,
        // close once they have, when nothing else is open on them.
        await Promise.race([
          Promise.all([...sessions].map((session) => new Promise((resolve) => session.once("close", resolve)))),
          new Promise((resolve) => setTimeout(resolve, LONG_LIVED_END_MS).unref()),
        ]);
      }
      // HTTP/1.1 keep-alive connections idle when the drain began are not closed then: a client's next request may
      // be on its way already, and met a reset (ECONNRESET; undici's "other side closed") that left it unsure
      // whether its POST ran (every rolling restart of a probe, 2026-11-28). A request that comes now is refused
      // (503 SERVER_SHUTTING_DOWN) and its connection closes with the answer (`Connection: close`); a connection
      // still open after IDLE_CONNECTION_GRACE_MS, whose client sent nothing, is closed then.
      await socketsClosed(sockets, Math.min(IDLE_CONNECTION_GRACE_MS, config.shutdownTimeoutMs));
      // Stops h1's timeout checks; the error it reports (h1 itself never listened) says nothing.
      h1?.close(() => {});
      for (const socket of sockets) socket.destroy();
      await closed;
      unsentOutput.stop();
      await accessWatcher.stop();
      // Calls answered during the drain wait for their records; whatever is left is stored now.
      await audit.flush();
      await sweeper.stop();
      await auditRetention.stop();
      await taskRetention.stop();
      const computeFailure = await computeStopped;
      await limiter.close();
      await storage.close();
      if (computeFailure !== null) throw computeFailure.err;
    },
  };
}
