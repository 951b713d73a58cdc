import { createPrivateKey, X509Certificate } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { lookup } from "node:dns/promises";
import { statSync } from "node:fs";
import { createSecureContext } from "node:tls";
import { parseArgs } from "node:util";
import { AuthService } from "../gen/compute/auth/v2/auth_pb.js";
import { NodePoolService } from "../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../gen/compute/cluster/v1/task_pb.js";
import { ConfigService } from "../gen/compute/configs/v2/configs_pb.js";
import { VAppService } from "../gen/compute/vapp/v1/vapp_pb.js";
import { KeyManagerService } from "../gen/kms/v1/kms_pb.js";
import { CATALOG_FILE_MAX_BYTES, shippedCatalogPath } from "./compute/catalog/load-catalog.js";
import { printable } from "./errors/caller-text.js";
import { decodeMasterKey, readMasterKeyMaterial } from "./kms/master-key-source.js";
import { ConfigError } from "./shared/config-error.js";
import { checkSettingFile, readSettingFile } from "./shared/setting-file.js";
import type { RateLimits } from "./ratelimit/rate-limits.js";

// Every setting, with its flag, its environment variable and its default, read and validated in one place.
// `--help` prints this table, so it is the operator's reference.
interface SettingSpec {
  flag: string;
  env: string;
  description: string;
  default: string;
}

const specs = {
  port: { flag: "port", env: "PORT", description: "TCP port for every protocol", default: "8080" },
  host: { flag: "host", env: "HOST", description: "address to listen on", default: "0.0.0.0" },
  dataDir: { flag: "data-dir", env: "DATA_DIR", description: "directory of the embedded store and generated master key", default: "./data" },
  databaseUrl: { flag: "database-url", env: "DATABASE_URL", description: "PostgreSQL connection URL (postgres://user@host:5432/db); several servers on one database share every key, node pool, task and credential. None means the embedded store in --data-dir. Needs MASTER_KEY or MASTER_KEY_FILE, the same on every server", default: "" },
  databasePoolSize: { flag: "database-pool-size", env: "DATABASE_POOL_SIZE", description: "connections to PostgreSQL one server keeps open at most (besides the one it listens for other servers' changes on)", default: "10" },
  databaseQueryTimeoutSeconds: { flag: "database-query-timeout-seconds", env: "DATABASE_QUERY_TIMEOUT_SECONDS", description: "longest time one statement may run or wait for a lock in PostgreSQL (its statement_timeout); its call is then answered UNAVAILABLE (STORE_UNAVAILABLE). A connection whose answer has not come 2 s later is given up as silent, and PostgreSQL ends the server's transactions idle for half this time, so that a server cut off from it holds no locks", default: "10" },
  masterKeyFile: { flag: "master-key-file", env: "MASTER_KEY_FILE", description: "file holding the 32-byte master key (raw or base64); default <data-dir>/master.key, created on first start", default: "" },
  masterKey: { flag: "master-key", env: "MASTER_KEY", description: "the master key itself, base64 of 32 bytes (overrides the file); prefer MASTER_KEY_FILE or the MASTER_KEY environment variable, since a value on the command line is visible to every local user through ps", default: "" },
  tlsCertFile: { flag: "tls-cert-file", env: "TLS_CERT_FILE", description: "PEM certificate chain; with --tls-key-file serves TLS with ALPN h2 and http/1.1", default: "" },
  tlsKeyFile: { flag: "tls-key-file", env: "TLS_KEY_FILE", description: "PEM private key for --tls-cert-file", default: "" },
  logLevel: { flag: "log-level", env: "LOG_LEVEL", description: "trace, debug, info, warn, error, fatal or silent", default: "info" },
  destroyGraceSeconds: { flag: "destroy-grace-seconds", env: "DESTROY_GRACE_SECONDS", description: "time between destroying a key version and erasing its material", default: String(30 * 24 * 3600) },
  minRotationSeconds: { flag: "min-rotation-seconds", env: "MIN_ROTATION_SECONDS", description: "shortest rotation period a key may have", default: String(24 * 3600) },
  sweepIntervalSeconds: { flag: "sweep-interval-seconds", env: "SWEEP_INTERVAL_SECONDS", description: "how often due destructions and rotations are carried out, and audit records and finished tasks past their retention deleted", default: "10" },
  auditRetentionSeconds: { flag: "audit-retention-seconds", env: "AUDIT_RETENTION_SECONDS", description: "how long audit records are kept: older ones are deleted at start and at every --sweep-interval-seconds; 0 keeps them forever (the trail then grows by about 60 bytes a call until the operator deletes with cloudplane-admin audit prune)", default: String(90 * 24 * 3600) },
  taskRetentionSeconds: { flag: "task-retention-seconds", env: "TASK_RETENTION_SECONDS", description: "how long finished node pool and vApp tasks are kept, counted from when they finished: older ones are deleted at start and at every --sweep-interval-seconds (GetTask then answers NOT_FOUND, as for a task that never existed); unfinished tasks are never deleted; 0 keeps them forever (the tasks tables then grow by a row a change)", default: String(30 * 24 * 3600) },
  keyCacheSize: { flag: "key-cache-size", env: "KEY_CACHE_SIZE", description: "keys kept in memory, with their unwrapped material and metadata; a key counts once more for each KiB of its description, labels and versions (64 characters a version)", default: "100000" },
  shutdownTimeoutSeconds: { flag: "shutdown-timeout-seconds", env: "SHUTDOWN_TIMEOUT_SECONDS", description: "how long SIGTERM waits for in-flight calls", default: "30" },
  corsAllowedOrigins: { flag: "cors-allowed-origins", env: "CORS_ALLOWED_ORIGINS", description: "comma-separated browser origins whose pages may call the API, e.g. the web console's, written as browsers send them: http or https://host[:port], lower case, no default port, nothing after (https://console.example.com); * for any. Anything else is refused at start. None by default, so no other site's page can use a browser's access", default: "" },
  vcdApiVersions: { flag: "vcd-api-versions", env: "VCD_API_VERSIONS", description: "comma-separated versions of the virtualization API (/api/...) that callers may name in Accept", default: "36.0,36.1,36.2,36.3,37.0,37.1,37.2,37.3,38.0,38.1" },
  accessTokenTtlSeconds: { flag: "access-token-ttl-seconds", env: "ACCESS_TOKEN_TTL_SECONDS", description: "lifetime of an access token issued by POST /public/v2/service_auth", default: "3600" },
  authFailuresPerMinute: { flag: "auth-failures-per-minute", env: "AUTH_FAILURES_PER_MINUTE", description: "failed authentications one address (or one client id at service_auth) may make in a minute; then it is refused with 429 for a minute", default: "20" },
  catalogFile: { flag: "catalog", env: "CATALOG_FILE", description: "JSON file of the platform catalog (service instances, clusters, flavors); none means the shipped catalog/default-catalog.json", default: "" },
  providerDelayMs: { flag: "provider-delay-ms", env: "PROVIDER_DELAY_MS", description: "time the simulated provider takes to bring one node up or down, and to build a vApp", default: "1000" },
  taskConcurrency: { flag: "task-concurrency", env: "TASK_CONCURRENCY", description: "node pool tasks one server runs at the same time", default: "16" },
  headersTimeoutSeconds: { flag: "headers-timeout-seconds", env: "HEADERS_TIMEOUT_SECONDS", description: "time a connection has for its first bytes (HTTP/2 preface or HTTP/1.1 request head) and an HTTP/1.1 request for its head; then it is closed", default: "10" },
  requestTimeoutSeconds: { flag: "request-timeout-seconds", env: "REQUEST_TIMEOUT_SECONDS", description: "time a request has to arrive whole, body included, on every protocol (streaming reflection exempt); then it is refused (HTTP/1.1: 408) or its stream reset", default: "30" },
  idleTimeoutSeconds: { flag: "idle-timeout-seconds", env: "IDLE_TIMEOUT_SECONDS", description: "an HTTP/1.1 keep-alive connection or HTTP/2 session with no traffic for this long is closed (HTTP/2: GOAWAY, calls in flight finish)", default: "60" },
  maxBufferedRequestBytes: { flag: "max-buffered-request-bytes", env: "MAX_BUFFERED_REQUEST_BYTES", description: "request bodies the server holds in memory at once, all connections together, while they arrive (REST, gRPC, the virtualization API); a body past it is refused UNAVAILABLE, to be retried", default: String(64 * 1024 * 1024) },
  maxConnections: { flag: "max-connections", env: "MAX_CONNECTIONS", description: "open connections the server accepts at once; more are closed on arrival", default: "10000" },
  maxUnsentOutputBytes: { flag: "max-unsent-output-bytes", env: "MAX_UNSENT_OUTPUT_BYTES", description: "bytes of answers one connection (an HTTP/1.1 socket, an HTTP/2 session) may hold that its client has not read yet; past it, or with unsent answers and nothing read for --idle-timeout-seconds, the connection is closed. Enough for the largest answer (a list of 1,000 keys, about 10 MB) to a client that reads slowly", default: String(16 * 1024 * 1024) },
  maxLongLivedCalls: { flag: "max-long-lived-calls", env: "MAX_LONG_LIVED_CALLS", description: "calls open by design (health Watch, streaming reflection) the server holds at once, about 55 KB each; more are refused RESOURCE_EXHAUSTED", default: "1000" },
  maxLongLivedCallsPerConnection: { flag: "max-long-lived-calls-per-connection", env: "MAX_LONG_LIVED_CALLS_PER_CONNECTION", description: "of those, on one connection", default: "16" },
  http2MaxStreams: { flag: "http2-max-streams", env: "HTTP2_MAX_STREAMS", description: "concurrent streams (calls) one HTTP/2 connection may have open", default: "128" },
  maxCallSeconds: { flag: "max-call-seconds", env: "MAX_CALL_SECONDS", description: "longest time a call may run, whatever deadline its caller set (calls that wait by design, such as WaitTask and health Watch, are held only to their caller's deadline); then it is answered DEADLINE_EXCEEDED", default: "60" },
  callPath: { flag: "call-path", env: "CALL_PATH", description: "direct: gRPC unary and REST calls go straight into the call pipeline; connect: every call goes through connect-node, the reference implementation the direct adapters are checked against", default: "direct" },
  metrics: { flag: "metrics", env: "METRICS", description: "GET /metrics (Prometheus text format): admin (only for the token of a principal with the admin role on \"*\"), open (for anyone who can reach the port, e.g. a Prometheus on a private network), or off (no metrics are kept and /metrics is not served)", default: "admin" },
  pipelineStages: { flag: "pipeline-stages", env: "PIPELINE_STAGES", description: "all; for benchmarks only, to measure what the stages cost: none (no stage at all: no request ids, deadlines, credentials or audit) or no-access (every stage but authentication and authorization: every caller may do everything)", default: "all" },
  rateLimitGetPerMinute: { flag: "rate-limit-get-per-minute", env: "RATE_LIMIT_GET_PER_MINUTE", description: "GET calls one credential may make a minute to a rate-limited service (whatever the protocol: counted by the method's REST mapping)", default: "100" },
  rateLimitGetPerDay: { flag: "rate-limit-get-per-day", env: "RATE_LIMIT_GET_PER_DAY", description: "GET calls one credential may make a day to a rate-limited service", default: "10000" },
  rateLimitPostPerMinute: { flag: "rate-limit-post-per-minute", env: "RATE_LIMIT_POST_PER_MINUTE", description: "POST, PATCH and DELETE calls (counted together) one credential may make a minute to a rate-limited service", default: "30" },
  rateLimitPostPerDay: { flag: "rate-limit-post-per-day", env: "RATE_LIMIT_POST_PER_DAY", description: "POST, PATCH and DELETE calls one credential may make a day to a rate-limited service", default: "1000" },
  rateLimitServices: { flag: "rate-limit-services", env: "RATE_LIMIT_SERVICES", description: "comma-separated services whose calls are rate-limited: full names of served services (kms.v1.KeyManagerService), package prefixes of them (compute.*, compute.cluster.*) or * for all; one that matches no served service is refused at start; empty for none", default: "compute.*" },
  redisUrl: { flag: "redis-url", env: "REDIS_URL", description: "Redis (redis://host:port/db) holding the rate-limit counts, shared by every server using it; none: each server counts in its own memory", default: "" },
  rateLimitKeyPrefix: { flag: "rate-limit-key-prefix", env: "RATE_LIMIT_KEY_PREFIX", description: "prefix of the rate-limit keys in Redis; servers with the same Redis and prefix share one budget per credential", default: "cloudplane:ratelimit" },
  rateLimitStoreFailure: { flag: "rate-limit-store-failure", env: "RATE_LIMIT_STORE_FAILURE", description: "when Redis cannot be reached: open (let calls through uncounted) or closed (refuse them with UNAVAILABLE); logged once per outage either way", default: "open" },
} satisfies Record<string, SettingSpec>;

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string;
  databasePoolSize: number;
  databaseQueryTimeoutMs: number;
  masterKeyFile: string;
  masterKey: string;
  tlsCertFile: string;
  tlsKeyFile: string;
  logLevel: string;
  destroyGraceMs: number;
  minRotationMs: number;
  sweepIntervalMs: number;
  auditRetentionMs: number;
  taskRetentionMs: number;
  keyCacheSize: number;
  shutdownTimeoutMs: number;
  corsAllowedOrigins: string[];
  accessTokenTtlMs: number;
  vcdApiVersions: string[];
  authFailuresPerMinute: number;
  catalogFile: string;
  providerDelayMs: number;
  taskConcurrency: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  maxBufferedRequestBytes: number;
  maxUnsentOutputBytes: number;
  http2MaxStreams: number;
  maxLongLivedCalls: number;
  maxLongLivedCallsPerConnection: number;
  maxCallMs: number;
  callPath: "direct" | "connect";
  pipelineStages: "all" | "none" | "no-access";
  metrics: "admin" | "open" | "off";
  rateLimits: RateLimits;
  rateLimitServices: string[];
  redisUrl: string;
  rateLimitKeyPrefix: string;
  rateLimitStoreFailure: "open" | "closed";
}

export { ConfigError };

const logLevels = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

// Decimal digits only (a minus sign before a number other than 0): Number() also reads "" and " " as 0, and "1e3",
// "0x10" and " 30 "; "-0" would pass a minimum of 0 and start a server on a random port. An empty setting (an
// environment variable set to nothing, as `PORT=${PORT}` leaves one in a compose file) is refused, not read as 0:
// that made AUDIT_RETENTION_SECONDS="" keep the trail forever and PORT="" listen on a random port.
const DECIMAL = /^(?:[0-9]+|-[1-9][0-9]*)$/;

function integer(name: keyof typeof specs, raw: string, min: number, max: number): number {
  const n = DECIMAL.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`--${specs[name].flag} (${specs[name].env}) must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

function oneOf<T extends string>(name: keyof typeof specs, raw: string, values: readonly T[]): T {
  const found = values.find((v) => v === raw);
  if (found === undefined) throw new ConfigError(`--${specs[name].flag} (${specs[name].env}) must be one of ${values.join(", ")}, got "${raw}"`);
  return found;
}

function versionList(raw: string): string[] {
  const versions = raw.split(",").map((v) => v.trim()).filter((v) => v !== "");
  const bad = versions.find((v) => !/^\d+\.\d+$/.test(v));
  if (versions.length === 0 || bad !== undefined) {
    throw new ConfigError(`--${specs.vcdApiVersions.flag} (${specs.vcdApiVersions.env}) must list versions such as 36.0,38.1, got "${raw}"`);
  }
  return versions;
}

// Limits far above any real traffic are allowed (benchmarks set them so to measure the checks alone), up to what a
// double counts exactly.
const MAX_LIMIT = Number.MAX_SAFE_INTEGER;

// The full names of the services the server serves on every protocol, which RATE_LIMIT_SERVICES may name. The same
// descriptors as `apiServices` of src/routes.ts (test/unit/config-served-services.test.ts keeps the two lists
// equal), named here so that reading the settings does not load the transports routes.ts imports.
export const servedServiceNames: readonly string[] = [AuthService, KeyManagerService, ConfigService, NodePoolService, TaskService, VAppService].map(
  (s) => s.typeName,
);

// An entry matches a service (src/pipeline/stages/rate-limit.ts) when it is "*", its full name, or "<prefix>.*" with
// the name starting "<prefix>.". An entry that matches no served service limits nothing: a typo
// (NodePoolServce) would leave the service unlimited without a word, so it is refused.
function serviceList(raw: string): string[] {
  const setting = `--${specs.rateLimitServices.flag} (${specs.rateLimitServices.env})`;
  const services = raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const bad = services.find((s) => !/^(\*|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.\*)?)$/.test(s));
  if (bad !== undefined) {
    throw new ConfigError(`${setting} lists services such as compute.*,kms.v1.KeyManagerService, got "${printable(bad, 200)}"`);
  }
  const matchesNothing = services.find((s) => !servedServiceNames.some((name) => s === "*" || (s.endsWith(".*") ? name.startsWith(s.slice(0, -1)) : s === name)));
  if (matchesNothing !== undefined) {
    throw new ConfigError(
      `${setting}: "${matchesNothing}" names no served service; name one in full (${servedServiceNames.join(", ")}), a package prefix of them (compute.*, compute.cluster.*, kms.*) or * for all`,
    );
  }
  return services;
}

// What a browser sends in Origin, which is matched as written (src/transport/cors.ts): scheme://host[:port] in
// lower case, the port only when not the scheme's default, nothing after. Any other spelling (a path, a trailing
// "/", capitals, :443 on https) would never match, so it is refused, with the spelling that would.
function originList(raw: string): string[] {
  const setting = `--${specs.corsAllowedOrigins.flag} (${specs.corsAllowedOrigins.env})`;
  const origins = raw.split(",").map((o) => o.trim()).filter((o) => o !== "");
  for (const origin of origins) {
    if (origin === "*") continue;
    let url: URL | null = null;
    try {
      url = new URL(origin);
    } catch {
      // Not a URL at all.
    }
    const rule = 'lists origins as browsers send them, scheme://host[:port] with scheme http or https and nothing after the port (no path, not even "/"), or *';
    if (url === null || (url.protocol !== "http:" && url.protocol !== "https:") || url.host === "") {
      throw new ConfigError(`${setting} ${rule}; got "${printable(origin, 200)}"`);
    }
    if (url.origin !== origin) throw new ConfigError(`${setting} ${rule}; got "${printable(origin, 200)}", which a browser would send as "${url.origin}"`);
  }
  return origins;
}

function redisUrlOf(raw: string): string {
  if (raw !== "" && !/^rediss?:\/\//.test(raw)) throw new ConfigError(`--${specs.redisUrl.flag} (${specs.redisUrl.env}) must be a redis:// or rediss:// URL`);
  return raw;
}

// A certificate chain or key in PEM is a few KiB; this bounds what a wrong file (a device, a log) can cost.
const TLS_FILE_MAX_BYTES = 1 << 20;

// The certificate and key files, read and checked as the TLS server will use them, so that a wrong file stops the
// start with its setting, its path and what is wrong in words, not OpenSSL's "error:0480006C:PEM routines::no start
// line" naming no file. src/server.ts reads the same files again when it creates the server.
function checkTlsFiles(certFile: string, keyFile: string): void {
  const cert = `--${specs.tlsCertFile.flag} (${specs.tlsCertFile.env}) ${certFile}`;
  const key = `--${specs.tlsKeyFile.flag} (${specs.tlsKeyFile.env}) ${keyFile}`;
  const certPem = readSettingFile(`--${specs.tlsCertFile.flag} (${specs.tlsCertFile.env})`, certFile, TLS_FILE_MAX_BYTES);
  const keyPem = readSettingFile(`--${specs.tlsKeyFile.flag} (${specs.tlsKeyFile.env})`, keyFile, TLS_FILE_MAX_BYTES);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certPem);
  } catch {
    throw new ConfigError(`${cert} holds no certificate: it must be PEM, starting with -----BEGIN CERTIFICATE----- (the server's certificate first, then its chain)`);
  }
  // Told by its PEM label (PKCS#8) or header (traditional): OpenSSL would otherwise try to ask for the passphrase.
  const keyText = keyPem.toString("latin1");
  if (keyText.includes("-----BEGIN ENCRYPTED PRIVATE KEY-----") || keyText.includes("Proc-Type: 4,ENCRYPTED")) {
    throw new ConfigError(`${key} is encrypted with a passphrase: the server takes an unencrypted key (mode 0600)`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(keyPem);
  } catch {
    throw new ConfigError(`${key} holds no private key: it must be PEM, starting with -----BEGIN PRIVATE KEY----- (or RSA PRIVATE KEY, EC PRIVATE KEY)`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new ConfigError(`${key} is not the private key of the certificate in ${cert}: give the key the certificate was issued for`);
  }
  try {
    createSecureContext({ cert: certPem, key: keyPem });
  } catch (err) {
    throw new ConfigError(`${cert} and ${key} cannot serve TLS: ${(err as Error).message}`);
  }
}

// A setting that is used as text and has no meaning when empty: HOST="" listened on every address, DATA_DIR=""
// failed with mkdir's raw ENOENT.
function nonEmpty(name: keyof typeof specs, raw: string, what: string): string {
  if (raw === "") throw new ConfigError(`--${specs[name].flag} (${specs[name].env}) must not be empty: ${what}`);
  return raw;
}

// The data directory may not exist yet (it is created), but a file or anything else in its place is refused here,
// before anything is written, rather than by mkdir's raw EEXIST.
function dataDirectory(raw: string): string {
  const setting = `--${specs.dataDir.flag} (${specs.dataDir.env})`;
  const dir = nonEmpty("dataDir", raw, "name a directory (it is created if missing)");
  let isDirectory: boolean;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return dir;
    throw new ConfigError(`${setting} ${dir} cannot be used (${code ?? (err as Error).message})`);
  }
  if (!isDirectory) throw new ConfigError(`${setting} ${dir} is not a directory`);
  return dir;
}

// The files read once the data directory is open (the master key by loadMasterKey, the catalog by build()), checked
// now so that a wrong one stops the start with exit 2 before anything is written there. MASTER_KEY wins over the file.
// The key's form too: one that is not 32 bytes stopped the start only once the store was open (exit 1, and an empty
// database left in the data directory).
function checkLaterFiles(masterKey: string, masterKeyFile: string, catalogFile: string): void {
  if (masterKey !== "") {
    const label = `--${specs.masterKey.flag} (${specs.masterKey.env})`;
    checkMasterKeyForm(() => decodeMasterKey(masterKey, label), `${label} must be base64 of exactly 32 bytes`);
  } else if (masterKeyFile !== "") {
    const label = `--${specs.masterKeyFile.flag} (${specs.masterKeyFile.env})`;
    checkMasterKeyForm(() => readMasterKeyMaterial(masterKeyFile, label), `${label} ${masterKeyFile} must hold the 32 bytes of the master key, raw or in base64`);
  }
  if (catalogFile !== "") checkSettingFile(`--${specs.catalogFile.flag} (${specs.catalogFile.env})`, catalogFile, CATALOG_FILE_MAX_BYTES);
}

// `refusal`: the message when the content is not a key (a file that cannot be read is refused by readSettingFile).
function checkMasterKeyForm(read: () => Uint8Array, refusal: string): void {
  let material: Uint8Array;
  try {
    material = read();
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(refusal);
  }
  material.fill(0);
}

// HOST names an address to listen on: one that does not resolve failed only at listen, after the data directory
// had its master key and admin account (getaddrinfo ENOTFOUND, exit 1). main.ts resolves it before build().
export async function checkHost(host: string): Promise<void> {
  try {
    await lookup(host);
  } catch (err) {
    throw new ConfigError(`--${specs.host.flag} (${specs.host.env}) ${host} is no address of this machine's resolver (${(err as { code?: string }).code ?? (err as Error).message}): give an IP address or a host name that resolves`);
  }
}

export function helpText(): string {
  const rows = Object.values(specs).map((s) => `  --${s.flag.padEnd(26)} ${s.env.padEnd(26)} ${s.description} (default: ${s.default || "none"})`);
  return ["Usage: cloudplane [flags]", "", "  flag                         environment variable", ...rows, "  --help                       print this text", ""].join("\n");
}

// Flags win over environment variables, which win over defaults.
export function loadConfig(argv: string[], env: NodeJS.ProcessEnv): Config | "help" {
  const options: Record<string, { type: "string" | "boolean" }> = { help: { type: "boolean" } };
  for (const s of Object.values(specs)) options[s.flag] = { type: "string" };
  const values: Record<string, string | boolean | undefined> = parseArgs({ args: argv, options, strict: true }).values;
  if (values.help === true) return "help";
  const raw = (name: keyof typeof specs): string => {
    const spec = specs[name];
    const fromFlag = values[spec.flag];
    return typeof fromFlag === "string" ? fromFlag : (env[spec.env] ?? spec.default);
  };
  const logLevel = raw("logLevel");
  if (!logLevels.includes(logLevel)) throw new ConfigError(`--log-level must be one of ${logLevels.join(", ")}, got "${logLevel}"`);
  const tlsCertFile = raw("tlsCertFile");
  const tlsKeyFile = raw("tlsKeyFile");
  if ((tlsCertFile === "") !== (tlsKeyFile === "")) throw new ConfigError("--tls-cert-file and --tls-key-file go together");
  if (tlsCertFile !== "") checkTlsFiles(tlsCertFile, tlsKeyFile);
  // Each value's own range first: a relation between two settings is checked only once both are valid, so that
  // REQUEST_TIMEOUT_SECONDS=-1 is told its range, not that it is shorter than the headers' timeout.
  const headersTimeoutMs = integer("headersTimeoutSeconds", raw("headersTimeoutSeconds"), 1, 3600) * 1000;
  const requestTimeoutMs = integer("requestTimeoutSeconds", raw("requestTimeoutSeconds"), 1, 3600) * 1000;
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `--headers-timeout-seconds (HEADERS_TIMEOUT_SECONDS, ${headersTimeoutMs / 1000}) must not be longer than --request-timeout-seconds (REQUEST_TIMEOUT_SECONDS, ${requestTimeoutMs / 1000}): a request's head is part of the request`,
    );
  }
  if (raw("databaseUrl") !== "" && raw("masterKey") === "" && raw("masterKeyFile") === "") {
    // Each server would otherwise generate a master key of its own in its data directory.
    throw new ConfigError("--database-url (DATABASE_URL) needs --master-key-file (MASTER_KEY_FILE) or MASTER_KEY: every server on the database must use the same master key");
  }
  checkLaterFiles(raw("masterKey"), raw("masterKeyFile"), raw("catalogFile"));
  const callPath = oneOf("callPath", raw("callPath"), ["direct", "connect"] as const);
  const pipelineStages = oneOf("pipelineStages", raw("pipelineStages"), ["all", "none", "no-access"] as const);
  return {
    port: integer("port", raw("port"), 0, 65535),
    host: nonEmpty("host", raw("host"), "name the address to listen on (0.0.0.0 for every IPv4 address)"),
    dataDir: dataDirectory(raw("dataDir")),
    databaseUrl: raw("databaseUrl"),
    databasePoolSize: integer("databasePoolSize", raw("databasePoolSize"), 1, 1000),
    databaseQueryTimeoutMs: integer("databaseQueryTimeoutSeconds", raw("databaseQueryTimeoutSeconds"), 1, 3600) * 1000,
    masterKeyFile: raw("masterKeyFile"),
    masterKey: raw("masterKey"),
    tlsCertFile,
    tlsKeyFile,
    logLevel,
    destroyGraceMs: integer("destroyGraceSeconds", raw("destroyGraceSeconds"), 0, 10 * 365 * 24 * 3600) * 1000,
    minRotationMs: integer("minRotationSeconds", raw("minRotationSeconds"), 1, 100 * 365 * 24 * 3600) * 1000,
    sweepIntervalMs: integer("sweepIntervalSeconds", raw("sweepIntervalSeconds"), 1, 24 * 3600) * 1000,
    auditRetentionMs: integer("auditRetentionSeconds", raw("auditRetentionSeconds"), 0, 100 * 365 * 24 * 3600) * 1000,
    taskRetentionMs: integer("taskRetentionSeconds", raw("taskRetentionSeconds"), 0, 100 * 365 * 24 * 3600) * 1000,
    keyCacheSize: integer("keyCacheSize", raw("keyCacheSize"), 1, 100_000_000),
    shutdownTimeoutMs: integer("shutdownTimeoutSeconds", raw("shutdownTimeoutSeconds"), 0, 3600) * 1000,
    corsAllowedOrigins: originList(raw("corsAllowedOrigins")),
    vcdApiVersions: versionList(raw("vcdApiVersions")),
    // At most what AccessToken.expires_in (an int32 of seconds) can say, about 68 years: beyond it connect-node
    // cannot encode the token's answer and every service_auth call failed with INTERNAL.
    accessTokenTtlMs: integer("accessTokenTtlSeconds", raw("accessTokenTtlSeconds"), 1, 2 ** 31 - 1) * 1000,
    authFailuresPerMinute: integer("authFailuresPerMinute", raw("authFailuresPerMinute"), 1, 1_000_000),
    catalogFile: raw("catalogFile") === "" ? shippedCatalogPath() : raw("catalogFile"),
    providerDelayMs: integer("providerDelayMs", raw("providerDelayMs"), 0, 3_600_000),
    taskConcurrency: integer("taskConcurrency", raw("taskConcurrency"), 1, 1000),
    headersTimeoutMs,
    requestTimeoutMs,
    idleTimeoutMs: integer("idleTimeoutSeconds", raw("idleTimeoutSeconds"), 1, 24 * 3600) * 1000,
    maxConnections: integer("maxConnections", raw("maxConnections"), 1, 1_000_000),
    // At least one request of the largest size, so that a lone one is never refused.
    maxBufferedRequestBytes: integer("maxBufferedRequestBytes", raw("maxBufferedRequestBytes"), 4 * 1024 * 1024, 64 * 1024 * 1024 * 1024),
    maxUnsentOutputBytes: integer("maxUnsentOutputBytes", raw("maxUnsentOutputBytes"), 16 * 1024, 2 ** 40),
    http2MaxStreams: integer("http2MaxStreams", raw("http2MaxStreams"), 1, 10_000),
    maxLongLivedCalls: integer("maxLongLivedCalls", raw("maxLongLivedCalls"), 1, 1_000_000),
    maxLongLivedCallsPerConnection: integer("maxLongLivedCallsPerConnection", raw("maxLongLivedCallsPerConnection"), 1, 10_000),
    maxCallMs: integer("maxCallSeconds", raw("maxCallSeconds"), 1, 24 * 3600) * 1000,
    callPath,
    pipelineStages,
    metrics: oneOf("metrics", raw("metrics"), ["admin", "open", "off"] as const),
    rateLimits: {
      GET: { perMinute: integer("rateLimitGetPerMinute", raw("rateLimitGetPerMinute"), 1, MAX_LIMIT), perDay: integer("rateLimitGetPerDay", raw("rateLimitGetPerDay"), 1, MAX_LIMIT) },
      POST: { perMinute: integer("rateLimitPostPerMinute", raw("rateLimitPostPerMinute"), 1, MAX_LIMIT), perDay: integer("rateLimitPostPerDay", raw("rateLimitPostPerDay"), 1, MAX_LIMIT) },
    },
    rateLimitServices: serviceList(raw("rateLimitServices")),
    redisUrl: redisUrlOf(raw("redisUrl")),
    rateLimitKeyPrefix: raw("rateLimitKeyPrefix"),
    rateLimitStoreFailure: oneOf("rateLimitStoreFailure", raw("rateLimitStoreFailure"), ["open", "closed"] as const),
  };
}
