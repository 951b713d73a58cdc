import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { removeDurably, renameDurably, writeFileAtomically } from "../shared/durable-file.js";
import { restrictToOwner } from "../shared/private-file.js";
import type { IdentityStore } from "../storage/identity-store.js";
import type { IdentityAdmin } from "./identity-admin.js";

export const ADMIN_CREDENTIALS_FILE = "admin-credentials.json";

// A store with no account beside the credentials file of an admin an earlier start created: the database was lost
// or replaced (moved away, truncated, or DATABASE_URL now names another one). Bootstrapping would write a new secret
// over the one that matches the backup of the database, and serve an empty store as if nothing had happened (a probe
// of 82d22ee), so the start is refused instead. Checked before the master key check records anything in the store.
export class StrayAdminCredentialsError extends Error {}

export async function refuseStrayAdminCredentials(store: IdentityStore, settings: { dataDir: string; databaseUrl: string }): Promise<void> {
  const path = join(settings.dataDir, ADMIN_CREDENTIALS_FILE);
  if (!existsSync(path) || !(await store.hasNoAccounts())) return;
  const restore = settings.databaseUrl === "" ? `restore ${join(settings.dataDir, "cloudplane.db")} from your backup` : "point DATABASE_URL at the database the account is in, or restore it from your backup";
  throw new StrayAdminCredentialsError(
    `the store has no admin account, but the data directory ${settings.dataDir} holds ${path}, the credentials of an ` +
      `earlier one: the database was lost or replaced. To keep the data, ${restore}; to start afresh with an empty ` +
      `store, move ${path} away (a new admin account is then created)`,
  );
}

// On the first start of an empty store: an admin service account with the admin role on every scope, its
// credentials written to a file of the data directory that only the server's user can read, never over an existing
// one (refuseStrayAdminCredentials has refused a start that would). The log says where, never what. The file is
// written and flushed as admin-credentials.json.new before the account is stored, and renamed into place after: a
// crash before the account is stored leaves an empty store and a staged file, which the next start writes again; a
// crash after it leaves the account and its staged file, which the next start puts in place (settleStaged). Neither
// leaves an admin nobody can log in as, nor a credentials file beside an empty store. On every later start a file
// left behind readable by others (a restore, a chmod) is made the owner's only again, as master.key is.
export async function bootstrapAdmin(admin: IdentityAdmin, dataDir: string, logger: Logger): Promise<void> {
  const path = join(dataDir, ADMIN_CREDENTIALS_FILE);
  if (!(await admin.hasNoAccounts())) {
    await settleStaged(admin, path, logger);
    restrictToOwner(path);
    return;
  }
  const prepared = await admin.prepareServiceAccount("admin");
  // With PostgreSQL nothing else needs the data directory, so it may not exist yet.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Exactly the body of POST /public/v2/service_auth, so that `curl -d @admin-credentials.json` gets a token.
  const credentials = { client_id: prepared.clientId, client_secret: prepared.clientSecret };
  writeFileAtomically(stagedPath(path), `${JSON.stringify(credentials, null, 2)}\n`);
  await admin.storeServiceAccount(prepared, [["admin", "*"]]);
  renameDurably(stagedPath(path), path);
  logger.info(
    { file: path },
    "created the admin service account; its client id and secret are in this file, readable by this user only: exchange them for a token at POST /public/v2/service_auth",
  );
}

const stagedPath = (path: string): string => `${path}.new`;

// A staged credentials file beside a store that has accounts: put in place if its account was stored (the start
// that wrote it crashed before the rename), else removed (its account never was).
async function settleStaged(admin: IdentityAdmin, path: string, logger: Logger): Promise<void> {
  const staged = stagedPath(path);
  if (!existsSync(staged)) return;
  let clientId: unknown;
  try {
    clientId = (JSON.parse(readFileSync(staged, "utf8")) as { client_id?: unknown }).client_id;
  } catch {
    // Cut short: its account was never stored, since the file is flushed first.
  }
  const stored = (await admin.listServiceAccounts()).some((account) => account.clientId === clientId);
  if (stored && !existsSync(path)) {
    renameDurably(staged, path);
    logger.info({ file: path }, "finished creating the admin service account, interrupted after it was stored: its client id and secret are in this file");
  } else {
    removeDurably(staged);
  }
}
