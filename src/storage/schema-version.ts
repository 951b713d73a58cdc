// Which builds may use a store, by the schema versions recorded in it (`schema_migrations`, both stores). Only a
// server upgrades a store, and no build uses a store a newer build has upgraded: a probe (2026-11-28) found that an
// operator command of a newer checkout (`git pull; npm run admin -- accounts list`) migrated the store under the
// older server still running on it, whose every audited call then failed (a table it wrote to was gone), and that
// a build started on a store of a newer one served it without a word.

// How the opener treats versions it has not applied: a server applies them; an operator command, which works
// beside a running server that may be of an older build, refuses.
export type MigrationMode = "upgrade" | "current only";

// The store cannot be used by this build as it is; nothing was changed. main.ts exits 1, the operator commands 1.
export class SchemaVersionError extends Error {}

// Throws when the store was written by a newer build, or (mode "current only") when it has not been upgraded to this
// build's versions yet. `known` are this build's versions, `applied` the store's.
export function checkSchemaVersions(known: readonly number[], applied: readonly number[], mode: MigrationMode): void {
  const newest = Math.max(...known);
  const unknown = applied.filter((version) => !known.includes(version));
  if (unknown.length > 0) {
    throw new SchemaVersionError(
      `the store was upgraded by a newer build of cloudplane (schema version ${Math.max(...unknown)}; this build knows versions up to ${newest}): ` +
        "run that build or a newer one. Nothing was changed",
    );
  }
  if (mode === "current only" && known.some((version) => !applied.includes(version))) {
    const current = applied.length > 0 ? Math.max(...applied) : 0;
    throw new SchemaVersionError(
      `the store is at schema version ${current} and this build's is ${newest}: start this build's server on it first, which upgrades it ` +
        "(stop every server of an older build before), then run the command again. Nothing was changed",
    );
  }
}
