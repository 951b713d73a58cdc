import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage, Message } from "@bufbuild/protobuf";

// Reads a string field of a request by its proto path ("parent_id", "key.id"), resolved against the descriptor
// once at start-up: the stages read the scope of a call and the ids of its resource with it.
export type FieldReader = (request: Message) => string;

// Throws at start-up when the path does not name a string field of the message.
export function stringFieldReader(desc: DescMessage, path: string): FieldReader {
  const names: string[] = [];
  let current: DescMessage = desc;
  const parts = path.split(".");
  parts.forEach((part, i) => {
    const field = current.fields.find((f) => f.name === part);
    if (field === undefined) throw new Error(`${desc.typeName} has no field "${path}"`);
    names.push(field.localName);
    if (i < parts.length - 1) {
      if (field.fieldKind !== "message") throw new Error(`${desc.typeName}: "${parts.slice(0, i + 1).join(".")}" is not a message field`);
      current = field.message;
    } else if (field.fieldKind !== "scalar" || field.scalar !== ScalarType.STRING) {
      throw new Error(`${desc.typeName}: "${path}" is not a string field`);
    }
  });
  if (names.length === 1) {
    const name = names[0]!;
    return (request) => ((request as unknown as Record<string, unknown>)[name] as string | undefined) ?? "";
  }
  return (request) => {
    let value: unknown = request;
    for (const name of names) value = (value as Record<string, unknown> | undefined)?.[name];
    return typeof value === "string" ? value : "";
  };
}

// The resource a call names, as its REST path with the request's values in place of the template's variables
// ("/v1/keys/{key_id}/versions/{key_version_id}" -> "/v1/keys/k1/versions/2"); for the audit trail.
export function resourcePathOf(desc: DescMessage, template: string): (request: Message) => string {
  const pieces: (string | ((request: Message) => string))[] = [];
  let rest = template;
  for (let open = rest.indexOf("{"); open >= 0; open = rest.indexOf("{")) {
    const close = rest.indexOf("}", open);
    if (close < 0) break;
    pieces.push(rest.slice(0, open));
    const variable = rest.slice(open + 1, close).split("=")[0]!;
    pieces.push(anyFieldReader(desc, variable));
    rest = rest.slice(close + 1);
  }
  pieces.push(rest);
  return (request) => pieces.map((p) => (typeof p === "string" ? p : p(request))).join("");
}

// Path variables may be numbers (key_version_id): read any scalar as text.
function anyFieldReader(desc: DescMessage, path: string): (request: Message) => string {
  const names: string[] = [];
  let current: DescMessage | undefined = desc;
  for (const part of path.split(".")) {
    const field: DescField | undefined = current?.fields.find((f) => f.name === part);
    if (field === undefined) throw new Error(`${desc.typeName} has no field "${path}"`);
    names.push(field.localName);
    current = field.fieldKind === "message" ? field.message : undefined;
  }
  return (request) => {
    let value: unknown = request;
    for (const name of names) value = (value as Record<string, unknown> | undefined)?.[name];
    return typeof value === "string" || typeof value === "number" || typeof value === "bigint" ? String(value) : "";
  };
}
