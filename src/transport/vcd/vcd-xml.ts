import { XMLBuilder } from "fast-xml-parser";

// Documents of the virtualization API, written with fast-xml-parser's builder (the contract forbids building XML by
// string concatenation): attribute values are escaped by the library.
export const VCLOUD_NS = "http://www.vmware.com/vcloud/v1.5";

// A character XML 1.0 does not allow in a document (a control but tab and line ends, a lone surrogate, U+FFFE and
// U+FFFF), which the builder writes as it is, markup escaped: one in a value made the whole answer unreadable to
// the caller's XML parser (a raw ESC or NUL of a caller's scope id in a 403's message: a probe, 2026-11-28). Each is
// written as \uXXXX instead, as the error messages write the unprintable characters they repeat.
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

function xmlChars(_name: string, value: unknown): unknown {
  if (typeof value !== "string") return value;
  return value.replace(NOT_XML_CHAR, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

// suppressBooleanAttributes off: the library would write an attribute whose value is "true" as a bare name, which is
// not XML.
const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: "@_",
  suppressEmptyNode: true,
  suppressBooleanAttributes: false,
  format: false,
  attributeValueProcessor: xmlChars,
  tagValueProcessor: xmlChars,
});

const declaration = '<?xml version="1.0" encoding="UTF-8"?>\n';

type XmlElement = Record<string, unknown>;

export function xmlDocument(root: string, element: XmlElement): string {
  return declaration + (builder.build({ [root]: element }) as string);
}

// The Error document every failure of the virtualization API answers with; the stable ErrorInfo.reason, when there
// is one, as vendorSpecificErrorCode.
export function errorDocument(httpStatus: number, minorErrorCode: string, message: string, reason: string | null = null): string {
  return xmlDocument("Error", {
    "@_xmlns": VCLOUD_NS,
    "@_majorErrorCode": String(httpStatus),
    "@_minorErrorCode": minorErrorCode,
    "@_message": message,
    ...(reason === null ? {} : { "@_vendorSpecificErrorCode": reason }),
  });
}

// minorErrorCode of a failure by its HTTP status, in the virtualization API's words.
export function minorErrorCodeOf(httpStatus: number): string {
  switch (httpStatus) {
    case 400:
      return "BAD_REQUEST";
    case 401:
      return "UNAUTHORIZED";
    case 403:
      return "ACCESS_TO_RESOURCE_IS_FORBIDDEN";
    case 404:
      return "RESOURCE_NOT_FOUND";
    case 405:
      return "METHOD_NOT_ALLOWED";
    case 406:
      return "NOT_ACCEPTABLE";
    case 409:
      return "DUPLICATE_NAME";
    case 415:
      return "UNSUPPORTED_MEDIA_TYPE";
    case 429:
      return "TOO_MANY_REQUESTS";
    case 501:
      return "NOT_IMPLEMENTED";
    case 503:
      return "SERVICE_UNAVAILABLE";
    default:
      return httpStatus >= 500 ? "INTERNAL_SERVER_ERROR" : "BAD_REQUEST";
  }
}
