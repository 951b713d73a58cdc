import type { AnyDesc, DescFile } from "@bufbuild/protobuf";
import { getComments } from "@bufbuild/protoplugin";

// The leading comment of a proto element as one paragraph text for an OpenAPI description: lines joined, the
// paragraph breaks kept. Undefined when the element has none (or its descriptor came without source info).
export function describe(desc: Exclude<AnyDesc, DescFile>): string | undefined {
  // protoplugin is typed against its own copy of @bufbuild/protobuf; it reads only the descriptor's proto and
  // the file's source info, which both copies share.
  const text = getComments(desc as unknown as Parameters<typeof getComments>[0]).leading;
  if (text === undefined) return undefined;
  const paragraphs = text
    .split(/\n\s*\n/)
    .map((p) =>
      p
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => line !== "")
        .join(" "),
    )
    .filter((p) => p !== "");
  return paragraphs.length === 0 ? undefined : paragraphs.join("\n\n");
}
