// google.api.http path templates (the grpc-gateway grammar):
//
//   Template = "/" [ Segments ] [ ":" Verb ]
//   Segments = Segment { "/" Segment }
//   Segment  = "*" | "**" | LITERAL | "{" FieldPath [ "=" Segments ] "}"
//
// Templates are parsed once at start-up; a request path is split once and then compared segment by segment.

export type TemplateSegment = { kind: "literal"; value: string } | { kind: "one" } | { kind: "rest" };

export interface TemplateVariable {
  // Field path as written in the annotation, e.g. "key.id" or "key_id".
  fieldPath: string;
  start: number;
  // Exclusive end index; undefined when the variable ends in "**" and takes the rest of the path.
  end: number | undefined;
}

export interface PathTemplate {
  source: string;
  segments: TemplateSegment[];
  variables: TemplateVariable[];
  verb: string | undefined;
}

// A request path split at "/" (and at the last ":" of the last segment for templates with a verb).
export interface SplitPath {
  raw: string[];
  // Null for a segment with a malformed percent escape (a "%" not followed by two hex digits, or bytes that are not
  // UTF-8): it matches no literal, and fills a variable, which the request builder then refuses naming its field.
  decoded: (string | null)[];
}

export function parsePathTemplate(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error(`path template ${source} must start with "/"`);
  const { path, verb } = splitVerb(source);
  const segments: TemplateSegment[] = [];
  const variables: TemplateVariable[] = [];
  const body = path.slice(1);
  for (const token of body === "" ? [] : tokenize(body, source)) {
    if (!token.startsWith("{")) {
      segments.push(parseSegment(token, source));
      continue;
    }
    const inner = token.slice(1, -1);
    const eq = inner.indexOf("=");
    const fieldPath = eq < 0 ? inner : inner.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(fieldPath)) {
      throw new Error(`path template ${source}: bad variable ${token}`);
    }
    const start = segments.length;
    const sub = eq < 0 ? ["*"] : inner.slice(eq + 1).split("/");
    for (const s of sub) segments.push(parseSegment(s, source));
    variables.push({ fieldPath, start, end: sub.at(-1) === "**" ? undefined : segments.length });
  }
  const restAt = segments.findIndex((s) => s.kind === "rest");
  if (restAt >= 0 && restAt !== segments.length - 1) throw new Error(`path template ${source}: "**" must come last`);
  return { source, segments, variables, verb };
}

// Splits at "/" outside braces, so that "{name=projects/*}" stays one token.
function tokenize(body: string, source: string): string[] {
  const tokens: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of body) {
    if (ch === "{") depth++;
    if (ch === "}") depth--;
    if (depth < 0 || depth > 1) throw new Error(`path template ${source}: unbalanced braces`);
    if (ch === "/" && depth === 0) {
      tokens.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  if (depth !== 0) throw new Error(`path template ${source}: unbalanced braces`);
  tokens.push(current);
  return tokens;
}

function splitVerb(source: string): { path: string; verb: string | undefined } {
  const colon = source.lastIndexOf(":");
  if (colon < 0 || colon < source.lastIndexOf("/") || colon < source.lastIndexOf("}")) {
    return { path: source, verb: undefined };
  }
  return { path: source.slice(0, colon), verb: source.slice(colon + 1) };
}

function parseSegment(token: string, source: string): TemplateSegment {
  if (token === "*") return { kind: "one" };
  if (token === "**") return { kind: "rest" };
  if (token === "" || /[{}*]/.test(token)) throw new Error(`path template ${source}: bad segment "${token}"`);
  return { kind: "literal", value: token };
}

// Percent-decodes each segment.
export function splitPath(path: string): SplitPath {
  const raw = path === "/" ? [] : path.slice(1).split("/");
  return { raw, decoded: raw.map((s) => decodeOrNull(s)) };
}

function decodeOrNull(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

// Returns the variable values in the order of template.variables (null for one with a malformed percent escape), or
// undefined if the path does not match.
export function matchTemplate(template: PathTemplate, path: SplitPath): (string | null)[] | undefined {
  const { segments } = template;
  const rest = segments.at(-1)?.kind === "rest";
  const fixed = rest ? segments.length - 1 : segments.length;
  if (rest ? path.raw.length < fixed : path.raw.length !== fixed) return undefined;
  for (let i = 0; i < fixed; i++) {
    const seg = segments[i];
    const value = path.decoded[i];
    if (seg === undefined || value === undefined) return undefined;
    // An empty segment ("/v1/keys//versions") never fills a variable or wildcard.
    if (seg.kind === "literal" ? seg.value !== value : value === "") return undefined;
  }
  return template.variables.map((v) => {
    const end = v.end ?? path.raw.length;
    if (end - v.start === 1 && v.end !== undefined) {
      const value = path.decoded[v.start];
      return value === undefined ? "" : value;
    }
    // Multi-segment values keep their "/" separators; an escaped "%2F" inside a segment stays escaped so that
    // it cannot be confused with a separator (grpc-gateway's default unescaping mode).
    const parts = path.raw.slice(v.start, end).map((s) => decodeOrNull(s.replace(/%2F/gi, "%252F")));
    return parts.includes(null) ? null : parts.join("/");
  });
}

// Orders templates so that the more specific one is tried first: at the first position where they differ, a
// literal beats "*", which beats the end of a template, which beats "**" (so "/a" wins over "/a/**" for "/a");
// a template with a verb beats one without.
export function compareSpecificity(a: PathTemplate, b: PathTemplate): number {
  const rank = (s: TemplateSegment | undefined): number =>
    s === undefined ? 2 : s.kind === "literal" ? 0 : s.kind === "one" ? 1 : 3;
  const n = Math.max(a.segments.length, b.segments.length);
  for (let i = 0; i < n; i++) {
    const d = rank(a.segments[i]) - rank(b.segments[i]);
    if (d !== 0) return d;
  }
  return (a.verb === undefined ? 1 : 0) - (b.verb === undefined ? 1 : 0);
}
