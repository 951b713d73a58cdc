import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { writeFileAtomically } from "../shared/durable-file.js";
import { restrictToOwner } from "../shared/private-file.js";
import type { IdentityAdmin } from "./identity-admin.js";

export const ADMIN_CREDENTIALS_FILE = "admin-credentials.json";

// On the first start of an empty store: an admin service account with the admin role on every scope, its
// credentials written to a file of the data directory that only the server's user can read. The log says where,
// never what. The file is on disk before the account is stored, so that a crash in between leaves an empty store
// (and the next start does it again) rather than an admin nobody can log in as. On every later start a file left
// behind readable by others (a restore, a chmod) is made the owner's only again, as master.key is.
export async function bootstrapAdmin(admin: IdentityAdmin, dataDir: string, logger: Logger): Promise<void> {
  const path = join(dataDir, ADMIN_CREDENTIALS_FILE);
  if (!(await admin.hasNoAccounts())) {
    restrictToOwner(path);
    return;
  }
  const prepared = await admin.prepareServiceAccount("admin");
  // With PostgreSQL nothing else needs the data directory, so it may not exist yet.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Exactly the body of POST /public/v2/service_auth, so that `curl -d @admin-credentials.json` gets a token.
  const credentials = { client_id: prepared.clientId, client_secret: prepared.clientSecret };
  writeFileAtomically(path, `${JSON.stringify(credentials, null, 2)}\n`);
  await admin.storeServiceAccount(prepared, [["admin", "*"]]);
  logger.info(
    { file: path },
    "created the admin service account; its client id and secret are in this file, readable by this user only: exchange them for a token at POST /public/v2/service_auth",
  );
}
