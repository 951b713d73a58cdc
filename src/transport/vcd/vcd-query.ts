import { create } from "@bufbuild/protobuf";
import { ListVAppTemplatesRequestSchema } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { ListVAppTemplatesRequest } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import { MAX_PAGE_SIZE } from "../../compute/vapps/template-query.js";
import type { Reason } from "../../errors/reasons.js";

// GET /api/query: the query service's parameters (CONTRACT section 7) decoded into a ListVAppTemplates request.
// Values are passed on as given; the domain checks ranges, filter and sort (src/compute/vapps/template-query.ts).

export class QueryRefusal extends Error {
  override readonly name = "QueryRefusal";

  // The ErrorInfo.reason of the refusal: QUERY_INVALID for what is no query of this API, REQUEST_INVALID for a
  // value out of range, as the domain gives it.
  constructor(
    message: string,
    readonly reason: Reason = "QUERY_INVALID",
  ) {
    super(message);
  }
}

const known = ["type", "page", "pageSize", "format", "filter", "sortAsc", "sortDesc"] as const;
const INT32_MAX = 2 ** 31 - 1;

export function decodeQuery(params: URLSearchParams): ListVAppTemplatesRequest {
  for (const name of new Set(params.keys())) {
    if (!(known as readonly string[]).includes(name)) throw new QueryRefusal(`unknown query parameter ${JSON.stringify(name)}; allowed: ${known.join(", ")}`);
    if (params.getAll(name).length > 1) throw new QueryRefusal(`the query parameter ${name} is given more than once`);
  }
  const type = params.get("type");
  if (type === null) throw new QueryRefusal("the query parameter type is required; this server answers type=vAppTemplate");
  if (type !== "vAppTemplate") throw new QueryRefusal(`query type ${JSON.stringify(type)} is not supported; this server answers type=vAppTemplate`);
  const format = params.get("format") ?? "records";
  if (format !== "records") throw new QueryRefusal(`query format ${JSON.stringify(format)} is not supported; this server answers format=records`);
  const page = count(params, "page");
  const pageSize = count(params, "pageSize");
  // The request's 0 means "the default" (proto3 cannot tell it from absent); a 0 written in the query is refused,
  // as the domain refuses any other number out of range, with its message.
  if (params.get("page") !== null && page === 0) throw new QueryRefusal("page: must be 1 or more, got 0", "REQUEST_INVALID");
  if (params.get("pageSize") !== null && (pageSize === 0 || pageSize > MAX_PAGE_SIZE)) {
    throw new QueryRefusal(`pageSize: must be between 1 and ${MAX_PAGE_SIZE}, got ${pageSize}`, "REQUEST_INVALID");
  }
  return create(ListVAppTemplatesRequestSchema, {
    page,
    pageSize,
    filter: params.get("filter") ?? "",
    sortAsc: params.get("sortAsc") ?? "",
    sortDesc: params.get("sortDesc") ?? "",
  });
}

// An unsigned decimal number; absent is 0 (the default).
function count(params: URLSearchParams, name: string): number {
  const text = params.get(name);
  if (text === null) return 0;
  const value = Number(text);
  if (text === "" || ![...text].every((c) => c >= "0" && c <= "9") || value > INT32_MAX) {
    throw new QueryRefusal(`the query parameter ${name} must be a whole number, got ${JSON.stringify(text.slice(0, 32))}`);
  }
  return value;
}
