import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { tempDir } from "../support/temp-dir.js";

// Start-up refusals say what is wrong with which setting: a value's own range before any relation between two
// settings, and a TLS file by its setting and path in words, not OpenSSL's codes.

function refusal(env: Record<string, string>): string {
  try {
    loadConfig([], env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("not refused");
}

describe("timeouts", () => {
  it.each([
    [{ REQUEST_TIMEOUT_SECONDS: "-1" }, '--request-timeout-seconds (REQUEST_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "-1"'],
    [{ REQUEST_TIMEOUT_SECONDS: "0" }, '--request-timeout-seconds (REQUEST_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "0"'],
    [{ REQUEST_TIMEOUT_SECONDS: "abc" }, '--request-timeout-seconds (REQUEST_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "abc"'],
    [{ HEADERS_TIMEOUT_SECONDS: "99999" }, '--headers-timeout-seconds (HEADERS_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "99999"'],
    [{ HEADERS_TIMEOUT_SECONDS: "0", REQUEST_TIMEOUT_SECONDS: "-5" }, '--headers-timeout-seconds (HEADERS_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "0"'],
  ])("%j is told its range", (env, message) => {
    expect(refusal(env)).toBe(message);
  });

  // Number() read "" as 0 and took "1e1", "0x10" and " 30 ": an empty AUDIT_RETENTION_SECONDS kept the trail forever,
  // an empty PORT listened on a random port.
  it.each(["", " ", " 30", "1e1", "0x10", "30.0", "-0", "+30"])("an integer setting of %j is refused, not read as a number", (value) => {
    expect(refusal({ REQUEST_TIMEOUT_SECONDS: value })).toBe(`--request-timeout-seconds (REQUEST_TIMEOUT_SECONDS) must be an integer from 1 to 3600, got "${value}"`);
    expect(refusal({ AUDIT_RETENTION_SECONDS: value })).toBe(`--audit-retention-seconds (AUDIT_RETENTION_SECONDS) must be an integer from 0 to 3153600000, got "${value}"`);
    expect(refusal({ PORT: value })).toMatch(/^--port \(PORT\) must be an integer from \d+ to 65535, got /);
  });

  it("a decimal integer is read as before, leading zeros and all", () => {
    const loaded = loadConfig([], { REQUEST_TIMEOUT_SECONDS: "045", AUDIT_RETENTION_SECONDS: "0" });
    expect(loaded !== "help" && [loaded.requestTimeoutMs, loaded.auditRetentionMs]).toEqual([45_000, 0]);
  });

  it("are compared once both are valid, with both values", () => {
    expect(refusal({ HEADERS_TIMEOUT_SECONDS: "40" })).toBe(
      "--headers-timeout-seconds (HEADERS_TIMEOUT_SECONDS, 40) must not be longer than --request-timeout-seconds (REQUEST_TIMEOUT_SECONDS, 30): a request's head is part of the request",
    );
  });
});

describe("TLS files", () => {
  const dir = tempDir();
  const path = (name: string) => join(dir.path, name);

  beforeAll(() => {
    const openssl = (args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
    for (const n of ["1", "2"]) {
      openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", path(`key${n}.pem`), "-out", path(`cert${n}.pem`), "-days", "1", "-subj", "/CN=localhost"]);
    }
    openssl(["pkey", "-in", path("key1.pem"), "-aes256", "-passout", "pass:secret", "-out", path("encrypted.pem")]);
    writeFileSync(path("bad.pem"), "hello\n");
    mkdirSync(path("a-dir"));
  });
  afterAll(() => dir.remove());

  const cert = (file: string) => `--tls-cert-file (TLS_CERT_FILE) ${path(file)}`;
  const key = (file: string) => `--tls-key-file (TLS_KEY_FILE) ${path(file)}`;

  it("that belong together are taken", () => {
    const loaded = loadConfig([], { TLS_CERT_FILE: path("cert1.pem"), TLS_KEY_FILE: path("key1.pem") });
    expect(loaded !== "help" && [loaded.tlsCertFile, loaded.tlsKeyFile]).toEqual([path("cert1.pem"), path("key1.pem")]);
  });

  it.each([
    ["missing.pem", "key1.pem", () => `${cert("missing.pem")} does not exist`],
    ["cert1.pem", "missing.pem", () => `${key("missing.pem")} does not exist`],
    ["a-dir", "key1.pem", () => `${cert("a-dir")} is a directory`],
    ["bad.pem", "key1.pem", () => `${cert("bad.pem")} holds no certificate: it must be PEM, starting with -----BEGIN CERTIFICATE----- (the server's certificate first, then its chain)`],
    ["key1.pem", "key1.pem", () => `${cert("key1.pem")} holds no certificate: it must be PEM, starting with -----BEGIN CERTIFICATE----- (the server's certificate first, then its chain)`],
    ["cert1.pem", "bad.pem", () => `${key("bad.pem")} holds no private key: it must be PEM, starting with -----BEGIN PRIVATE KEY----- (or RSA PRIVATE KEY, EC PRIVATE KEY)`],
    ["cert1.pem", "cert1.pem", () => `${key("cert1.pem")} holds no private key: it must be PEM, starting with -----BEGIN PRIVATE KEY----- (or RSA PRIVATE KEY, EC PRIVATE KEY)`],
    ["cert1.pem", "encrypted.pem", () => `${key("encrypted.pem")} is encrypted with a passphrase: the server takes an unencrypted key (mode 0600)`],
    ["cert1.pem", "key2.pem", () => `${key("key2.pem")} is not the private key of the certificate in ${cert("cert1.pem")}: give the key the certificate was issued for`],
  ])("cert %s with key %s are refused in words, naming the file", (certFile, keyFile, message) => {
    const text = refusal({ TLS_CERT_FILE: path(certFile), TLS_KEY_FILE: path(keyFile) });
    expect(text).toBe(message());
    expect(text).not.toMatch(/error:[0-9A-F]{8}|routines/);
  });

  it("stop the server's start with exit 2 and the message, before it listens", () => {
    const data = path("data");
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts"], {
      env: { ...process.env, DATA_DIR: data, PORT: "0", HOST: "127.0.0.1", TLS_CERT_FILE: path("cert1.pem"), TLS_KEY_FILE: path("key2.pem") },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr.split("\n")[0]).toBe(`${key("key2.pem")} is not the private key of the certificate in ${cert("cert1.pem")}: give the key the certificate was issued for`);
  });
});
