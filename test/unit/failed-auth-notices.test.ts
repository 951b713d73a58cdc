import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import { Authenticator } from "../../src/identity/authenticator.js";
import { IdentityAdmin } from "../../src/identity/identity-admin.js";
import type { Credentials } from "../../src/pipeline/call.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteIdentityStore } from "../../src/storage/sqlite/sqlite-identity-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";

// A source address or client id that gets blocked for failed authentications is reported once per block at warn
// (docs/access.md, "Failed authentications"): who, the limit, for how long; never a line per failure, a secret or
// a token.

interface Line {
  fields: Record<string, unknown>;
  message: string;
}

function credentials(c: Partial<Credentials>): Credentials {
  return { token: undefined, apiKey: undefined, workspaceId: undefined, ...c };
}

async function refusedReason(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (err) {
    if (err instanceof DomainError) return err.detail.reason;
    throw err;
  }
  throw new Error("not refused");
}

describe("blocks for failed authentications", () => {
  let dir: ReturnType<typeof tempDir>;
  let db: ReturnType<typeof openDatabase>;
  let store: SqliteIdentityStore;
  let auth: Authenticator;
  let lines: Line[];

  beforeEach(() => {
    dir = tempDir();
    db = openDatabase(dir.path, "upgrade");
    store = new SqliteIdentityStore(db);
    lines = [];
    const logger = { warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }) };
    auth = new Authenticator(store, new FakeClock(), { tokenTtlMs: 3600_000, failuresPerMinute: 3, logger: logger as never });
  });
  afterEach(() => {
    db.close();
    dir.remove();
  });

  it("log one warn line when an address is blocked, none for the failures before or after, with no token", async () => {
    const wrong = "cpat.AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
    const reasons: string[] = [];
    for (let i = 0; i < 10; i++) reasons.push(await refusedReason(() => auth.authenticate(credentials({ token: wrong }), { peerAddress: "192.0.2.7" }, "kms")));
    expect(reasons).toEqual([...Array(3).fill("UNAUTHENTICATED"), ...Array(7).fill("AUTHENTICATION_RATE_LIMITED")]);
    expect(lines).toEqual([
      {
        fields: { address: "192.0.2.7", failuresPerMinute: 3, blockedSeconds: 60 },
        message: "failed authentications: address 192.0.2.7 made more than 3 failed authentications in a minute: its failures are refused for 60 s (valid credentials from it still pass)",
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain("BBBB");
  });

  it("log one warn line when a client id is blocked, naming it and never the secret", async () => {
    const admin = new IdentityAdmin(store, new FakeClock());
    const account = await admin.createServiceAccount("app");
    const wrongSecret = `cpcs.${account.clientId}.wrongwrongwrongwrongwrongwrongwrongwrong`;
    // A new address each time: only the client id is blocked.
    for (let i = 0; i < 8; i++) await refusedReason(() => auth.issueToken(account.clientId, wrongSecret, `198.51.100.${i}`, "compute"));
    expect(lines).toEqual([
      {
        fields: { clientId: account.clientId, failuresPerMinute: 3, blockedSeconds: 60 },
        message: `failed authentications: client id ${account.clientId} had more than 3 failed authentications in a minute: it is refused for 60 s, even with its right secret`,
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain("wrongwrong");
  });

  it("escape a client id's unprintable characters, and do not show a credential sent as client_id", async () => {
    for (let i = 0; i < 4; i++) await refusedReason(() => auth.issueToken("sa-\u001b[2J\nforged", "x", `203.0.113.${i}`, "compute"));
    for (let i = 0; i < 4; i++) await refusedReason(() => auth.issueToken("cpcs.sa-abc.secretsecretsecret", "x", `203.0.113.${10 + i}`, "compute"));
    expect(lines.map((l) => l.fields.clientId)).toEqual(["sa-\\u001b[2J\\u000aforged", "(a credential sent as client_id, not shown)"]);
    expect(JSON.stringify(lines)).not.toContain("secretsecret");
  });

  it("log at most 100 blocks a minute one by one, then one line saying the rest are counted", async () => {
    const wrong = "cpat.AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
    for (let a = 0; a < 103; a++) {
      for (let i = 0; i < 4; i++) await refusedReason(() => auth.authenticate(credentials({ token: wrong }), { peerAddress: `10.0.${a >> 8}.${a & 255}` }, "kms"));
    }
    expect(lines).toHaveLength(101);
    expect(lines[100]!.message).toBe(
      "more than 100 addresses or client ids were blocked for failed authentications within a minute: further blocks are counted, not logged one by one",
    );
  });
});
