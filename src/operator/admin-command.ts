import { parseArgs } from "node:util";
import { printable } from "../errors/caller-text.js";
import { AdminError } from "../identity/identity-admin.js";
import type { IdentityAdmin } from "../identity/identity-admin.js";
import { pruneAuditTrail } from "../identity/audit-retention.js";
import type { AuditRecord } from "../identity/identity-model.js";
import { roleDescriptions, roleNames } from "../identity/roles.js";
import { formatScope, scopeKinds } from "../identity/scopes.js";
import type { Clock } from "../shared/clock.js";
import { rfc3339Millis } from "../shared/rfc3339.js";
import type { AuditStore } from "../storage/identity-store.js";

export const adminHelp = `Usage: cloudplane-admin [--data-dir DIR] [--json] <command> [arguments]

Manages who may call the server, on the store of the data directory (DATA_DIR; default ./data), or on the
PostgreSQL database of DATABASE_URL when it is set. It works while the server runs: a change takes effect within a
second.

  accounts create NAME [--grant ROLE@SCOPE ...]  make a service account; prints its client id and secret once
  accounts list                                  list service accounts
  accounts revoke ACCOUNT                        revoke an account with all its tokens and API keys
  tokens revoke ACCOUNT                          revoke every access token of an account
  api-keys create ACCOUNT --workspace ID         make an API key of a workspace; prints it once
  api-keys list [ACCOUNT]                        list API keys (never the keys themselves)
  api-keys revoke KEY_ID                         revoke an API key
  grants add ACCOUNT ROLE SCOPE                  grant a role on a scope
  grants list [ACCOUNT]                          list grants
  grants remove GRANT_ID                         remove a grant
  audit [--since T] [--until T] [--principal ACCOUNT] [--resource R] [--limit N]
                                                 print audit records from --since up to (not including) --until,
                                                 oldest first (T: ISO 8601 time); at most N of them, 1000 by
                                                 default: when more match, stderr says so and how to see the rest.
                                                 R: a scope (kms-namespace:payments), or a REST path (/v1/keys/ID)
                                                 and what is under it, its ids percent-encoded as in a URL
  audit prune --before T                         delete the audit records older than T for good (the server itself
                                                 deletes those older than AUDIT_RETENTION_SECONDS, 90 days by default)

ACCOUNT is an account's name or principal id. Roles: ${roleNames.join(", ")}.
SCOPE is "*" (everything), "<kind>:*" or "<kind>:<id>", kind one of ${scopeKinds.join(", ")};
for example kms-namespace:payments or service-instance:vdc-a.
`;

export class UsageError extends Error {}

export interface AdminContext {
  admin: IdentityAdmin;
  audit: AuditStore;
  clock: Clock;
  // Standard output: the command's answer (one JSON object a line with --json).
  print(line: string): void;
  // Standard error: what the operator should know beside the answer (records left out, a name that matched nothing).
  note(line: string): void;
}

const DEFAULT_AUDIT_LIMIT = 1000;

function iso(ms: number | null): string {
  return ms === null ? "" : new Date(ms).toISOString();
}

function time(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const ms = rfc3339Millis(text);
  if (ms === null) throw new UsageError(`${flag} must be an ISO 8601 time such as 2026-11-23T10:00:00Z, got "${text}"`);
  return ms;
}

function arg(args: string[], i: number, what: string): string {
  const value = args[i];
  if (value === undefined) throw new UsageError(`missing ${what}`);
  return value;
}

// Runs one command; throws UsageError or AdminError with a message for the operator.
export async function runAdminCommand(argv: string[], ctx: AdminContext): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      "data-dir": { type: "string" },
      json: { type: "boolean" },
      grant: { type: "string", multiple: true },
      workspace: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      before: { type: "string" },
      principal: { type: "string" },
      resource: { type: "string" },
      limit: { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
  const json = values.json === true;
  const out = (human: string, data: unknown): void => ctx.print(json ? JSON.stringify(data) : human);
  const [group, action, ...rest] = positionals;
  const { admin } = ctx;
  switch (`${group ?? ""} ${action ?? ""}`.trim()) {
    case "accounts create": {
      const grants = (values.grant ?? []).map((g): [string, string] => {
        const at = g.indexOf("@");
        if (at < 0) throw new UsageError(`--grant takes ROLE@SCOPE, got "${g}"`);
        return [g.slice(0, at), g.slice(at + 1)];
      });
      const created = await admin.createServiceAccount(arg(rest, 0, "NAME"), grants);
      out(
        `created service account ${created.account.name} (principal ${created.account.id})\nclient_id: ${created.clientId}\nclient_secret: ${created.clientSecret}\nThe secret is shown only now; the server keeps only its hash.`,
        { name: created.account.name, principalId: created.account.id, client_id: created.clientId, client_secret: created.clientSecret },
      );
      return;
    }
    case "accounts list":
      for (const a of await admin.listServiceAccounts()) {
        out(`${a.name}\t${a.id}\t${a.clientId}\tcreated ${iso(a.createdAt)}${a.revokedAt === null ? "" : `\trevoked ${iso(a.revokedAt)}`}`, {
          name: a.name,
          principalId: a.id,
          clientId: a.clientId,
          createdAt: iso(a.createdAt),
          revokedAt: a.revokedAt === null ? null : iso(a.revokedAt),
        });
      }
      return;
    case "accounts revoke": {
      const account = await admin.revokeServiceAccount(arg(rest, 0, "ACCOUNT"));
      out(`revoked service account ${account.name} with all its tokens and API keys`, { revoked: account.id });
      return;
    }
    case "tokens revoke": {
      const count = await admin.revokeTokens(arg(rest, 0, "ACCOUNT"));
      out(`revoked ${count} access token(s)`, { revokedTokens: count });
      return;
    }
    case "api-keys create": {
      if (values.workspace === undefined) throw new UsageError("api-keys create needs --workspace ID");
      const created = await admin.createApiKey(arg(rest, 0, "ACCOUNT"), values.workspace);
      out(
        `created API key ${created.key.id} of workspace ${created.key.workspaceId}\napi_key: ${created.text}\nSend it as x-api-key with x-workspace-id: ${created.key.workspaceId}. It is shown only now.`,
        { id: created.key.id, workspaceId: created.key.workspaceId, api_key: created.text },
      );
      return;
    }
    case "api-keys list":
      for (const k of await admin.listApiKeys(rest[0])) {
        out(`${k.id}\tprincipal ${k.principalId}\tworkspace ${k.workspaceId}\tcreated ${iso(k.createdAt)}${k.revokedAt === null ? "" : `\trevoked ${iso(k.revokedAt)}`}`, {
          id: k.id,
          principalId: k.principalId,
          workspaceId: k.workspaceId,
          createdAt: iso(k.createdAt),
          revokedAt: k.revokedAt === null ? null : iso(k.revokedAt),
        });
      }
      return;
    case "api-keys revoke":
      await admin.revokeApiKey(arg(rest, 0, "KEY_ID"));
      out("revoked", { revoked: rest[0] });
      return;
    case "grants add": {
      const grant = await admin.grant(arg(rest, 0, "ACCOUNT"), arg(rest, 1, "ROLE"), arg(rest, 2, "SCOPE"));
      out(`granted ${admin.describeGrant(grant)} (grant ${grant.id}): ${roleDescriptions[grant.role]}`, {
        id: grant.id,
        principalId: grant.principalId,
        role: grant.role,
        scope: formatScope(grant.scope),
      });
      return;
    }
    case "grants list":
      for (const g of await admin.listGrants(rest[0])) {
        out(`${g.id}\tprincipal ${g.principalId}\t${admin.describeGrant(g)}`, { id: g.id, principalId: g.principalId, role: g.role, scope: formatScope(g.scope) });
      }
      return;
    case "grants remove":
      await admin.revokeGrant(arg(rest, 0, "GRANT_ID"));
      out("removed", { removed: rest[0] });
      return;
    case "audit": {
      const limit = values.limit === undefined ? DEFAULT_AUDIT_LIMIT : Number(values.limit);
      if (!Number.isSafeInteger(limit) || limit < 1) throw new UsageError(`--limit must be a positive integer, got "${values.limit}"`);
      const since = time(values.since, "--since");
      const until = time(values.until, "--until");
      // The records from since up to, not including, until: none can match a range that ends where it starts or earlier.
      if (since !== undefined && until !== undefined && since >= until) {
        throw new UsageError(`--since must be earlier than --until (records are shown from --since up to, not including, --until), got --since ${iso(since)} and --until ${iso(until)}`);
      }
      let principal = values.principal;
      if (principal !== undefined && principal !== "anonymous") {
        const account = (await admin.listServiceAccounts()).find((a) => a.name === principal || a.id === principal);
        // Kept as given (the records of a principal id whose account is gone would still be found), but said.
        if (account === undefined) ctx.note(`no service account has id or name "${printable(principal, 128)}": showing the records of principal id "${printable(principal, 128)}" as given`);
        principal = account?.id ?? principal;
      }
      // A resource path names ids percent-encoded, as a REST URL does, and the trail writes escapes in upper case
      // (%2F); an operator may paste them from a URL in lower case.
      const resource = values.resource?.startsWith("/") === true ? values.resource.replace(/%[0-9a-f]{2}/gi, (e) => e.toUpperCase()) : values.resource;
      // One more than shown, to know whether the limit cut.
      const records = await ctx.audit.query({ since, until, principal, resource, limit: limit + 1 });
      const shown = records.slice(0, limit);
      for (const r of shown) out(auditLine(r), { ...r, at: iso(r.at) });
      if (records.length > limit) {
        const last = iso(shown[shown.length - 1]!.at);
        ctx.note(
          `showed ${limit} audit record(s), the oldest that match (--limit ${limit}${values.limit === undefined ? ", the default" : ""}); more exist. ` +
            `See them with a larger --limit, or the next ones with --since ${last} (the records of that millisecond shown again), or narrow with --until, --principal or --resource.`,
        );
      }
      return;
    }
    case "audit prune": {
      const before = time(values.before, "--before");
      if (before === undefined) throw new UsageError("audit prune needs --before T, the time before which records are deleted");
      // A time to come is a typo (a year off): the records of calls not yet made cannot be meant.
      if (before > ctx.clock.now()) throw new UsageError(`--before must not be later than now, got ${iso(before)}`);
      const batches = await pruneAuditTrail(ctx.audit, before);
      // The trail is stored a batch of calls to a row (audit-batch.ts); counting records would mean decoding them all.
      out(`deleted the audit records before ${iso(before)}: ${batches} stored batch(es) of records`, { before: iso(before), batches });
      return;
    }
    default:
      throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  }
}

// One record a line, its fields apart by tabs. Callers chose much of a record's text (the scope is the namespace they
// named, as sent; records stored before ids were percent-encoded hold a resource's ids as sent too), so every
// unprintable character of every field (Unicode category C: controls, tab and newline included, bidi overrides,
// zero widths; and U+2028 and U+2029) is written as \uXXXX: raw, an ESC sequence would drive the operator's terminal and a tab or a
// newline would forge fields and whole records. Nothing is cut; --json gives every text exactly.
function auditLine(r: AuditRecord): string {
  return [iso(r.at), r.principal, r.method, r.protocol, r.scope || "-", r.resource, `code=${r.code}`, `request=${r.requestId}`]
    .map((field) => printable(field, Infinity))
    .join("\t");
}

export { AdminError };
