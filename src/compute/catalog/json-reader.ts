// A small reader over parsed JSON that knows where it is, so that every complaint names the exact entry
// ("serviceInstances[1].clusters[0].capacity must be a positive integer"). Hand-written on purpose: the catalog is
// small, and its messages matter more to an operator than a schema library's would.

export class CatalogError extends Error {
  override readonly name = "CatalogError";
}

export type JsonScalar = string | number | boolean;

function join(path: string, name: string): string {
  return path === "" ? name : `${path}.${name}`;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : JSON.stringify(value);
}

export function fail(path: string, problem: string): never {
  throw new CatalogError(`catalog: ${path === "" ? "the document" : path} ${problem}`);
}

// One JSON object of the catalog, read field by field.
export class ObjectReader {
  private constructor(
    readonly path: string,
    private readonly fields: Record<string, unknown>,
  ) {}

  // `known` lists the fields the entry may have; anything else is a typo the operator should hear about. Loose
  // entries pass `null` and keep their extra fields (see scalars()).
  static at(path: string, value: unknown, known: readonly string[] | null): ObjectReader {
    if (typeof value !== "object" || value === null || Array.isArray(value)) fail(path, `must be an object, got ${describe(value)}`);
    const fields = value as Record<string, unknown>;
    if (known !== null) {
      const unknown = Object.keys(fields).find((k) => !known.includes(k));
      if (unknown !== undefined) fail(join(path, unknown), `is not a known field; allowed: ${known.join(", ")}`);
    }
    return new ObjectReader(path, fields);
  }

  pathOf(name: string): string {
    return join(this.path, name);
  }

  has(name: string): boolean {
    return this.fields[name] !== undefined;
  }

  private required(name: string): unknown {
    const value = this.fields[name];
    if (value === undefined) fail(this.pathOf(name), "is required");
    return value;
  }

  string(name: string, pattern?: { regex: RegExp; rule: string }): string {
    const value = this.required(name);
    if (typeof value !== "string" || value === "") fail(this.pathOf(name), `must be a non-empty string, got ${describe(value)}`);
    if (pattern !== undefined && !pattern.regex.test(value)) fail(this.pathOf(name), `must be ${pattern.rule}, got ${describe(value)}`);
    return value;
  }

  optionalString(name: string, fallback: string): string {
    return this.has(name) ? this.string(name) : fallback;
  }

  integer(name: string, min: number, rule: string): number {
    const value = this.required(name);
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) fail(this.pathOf(name), `must be ${rule}, got ${describe(value)}`);
    return value;
  }

  optionalInteger(name: string, min: number, rule: string, fallback: number): number {
    return this.has(name) ? this.integer(name, min, rule) : fallback;
  }

  optionalBoolean(name: string, fallback: boolean): boolean {
    if (!this.has(name)) return fallback;
    const value = this.fields[name];
    if (typeof value !== "boolean") fail(this.pathOf(name), `must be true or false, got ${describe(value)}`);
    return value;
  }

  // A nested object field, read with its own known fields; null when it is optional and absent.
  child(name: string, known: readonly string[], opts: { optional: boolean }): ObjectReader | null {
    if (opts.optional && !this.has(name)) return null;
    return ObjectReader.at(this.pathOf(name), this.required(name), known);
  }

  // An array of non-empty strings; absent means empty.
  stringList(name: string): string[] {
    return this.list(name, { optional: true, nonEmpty: false }).map(({ path, value }) => {
      if (typeof value !== "string" || value === "") fail(path, `must be a non-empty string, got ${describe(value)}`);
      return value;
    });
  }

  // An object of string values (Kubernetes resources: {"cpu": "2"}), keys and values checked by pattern; absent
  // means empty.
  stringMap(name: string, key: { regex: RegExp; rule: string }, value: { regex: RegExp; rule: string }): Record<string, string> {
    if (!this.has(name)) return {};
    const object = ObjectReader.at(this.pathOf(name), this.fields[name], null);
    const map: Record<string, string> = {};
    for (const [k, v] of Object.entries(object.fields)) {
      if (!key.regex.test(k)) fail(object.pathOf(k), `is not a valid name: must be ${key.rule}`);
      if (typeof v !== "string" || !value.regex.test(v)) fail(object.pathOf(k), `must be ${value.rule}, got ${describe(v)}`);
      map[k] = v;
    }
    return map;
  }

  // The elements of an array field, each with its own path. An absent optional list is empty.
  list(name: string, opts: { optional: boolean; nonEmpty: boolean }): { path: string; value: unknown }[] {
    if (opts.optional && !this.has(name)) return [];
    const value = this.required(name);
    if (!Array.isArray(value)) fail(this.pathOf(name), `must be an array, got ${describe(value)}`);
    if (opts.nonEmpty && value.length === 0) fail(this.pathOf(name), "must not be empty");
    return value.map((item: unknown, i) => ({ path: `${this.pathOf(name)}[${i}]`, value: item }));
  }

  // Every field except the named ones, which must be plain strings, numbers or booleans: the loose part of an
  // entry that a later feature reads with its own rules.
  scalars(except: readonly string[]): Record<string, JsonScalar> {
    const extra: Record<string, JsonScalar> = {};
    for (const [name, value] of Object.entries(this.fields)) {
      if (except.includes(name)) continue;
      if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
        fail(this.pathOf(name), `must be a string, number or boolean, got ${describe(value)}`);
      }
      extra[name] = value;
    }
    return extra;
  }
}

// Fails on the second entry of a list whose key was already used by an earlier one.
export function checkUnique<T>(entries: readonly { path: string; item: T }[], key: (item: T) => string, what: string): void {
  const first = new Map<string, string>();
  for (const { path, item } of entries) {
    const k = key(item);
    const earlier = first.get(k);
    if (earlier !== undefined) fail(path, `repeats the ${what} "${k}" of ${earlier}`);
    first.set(k, path);
  }
}
