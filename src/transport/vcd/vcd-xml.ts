import { XMLBuilder } from "fast-xml-parser";

// Documents of the virtualization API, written with fast-xml-parser's builder (the contract forbids building XML by
// string concatenation): attribute values are escaped by the library.
export const VCLOUD_NS = "http://www.vmware.com/vcloud/v1.5";

// suppressBooleanAttributes off: the library would write an attribute whose value is "true" as a bare name, which is
// not XML.
const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: "@_", suppressEmptyNode: true, suppressBooleanAttributes: false, format: false });

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
    case 503:
      return "SERVICE_UNAVAILABLE";
    default:
      return httpStatus >= 500 ? "INTERNAL_SERVER_ERROR" : "BAD_REQUEST";
  }
}
