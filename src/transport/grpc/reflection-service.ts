import { toBinary } from "@bufbuild/protobuf";
import type { DescFile, DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import type { ServerReflection as ServerReflectionV1alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { file_google_rpc_error_details } from "../../../gen/google/rpc/error_details_pb.js";
import { file_google_rpc_status } from "../../../gen/google/rpc/status_pb.js";
import { invalidArgument } from "../../errors/domain-error.js";

// v1 and v1alpha messages differ only in their type names, so the core
// works on their common shape and each version's messages fit it.
interface ReflectionRequest {
  host: string;
  messageRequest:
    | { case: "fileByFilename"; value: string }
    | { case: "fileContainingSymbol"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: "allExtensionNumbersOfType"; value: string }
    | { case: "listServices"; value: string }
    | { case: undefined; value?: undefined };
}

type MessageResponse =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

interface ReflectionResponse<Request extends ReflectionRequest> {
  validHost: string;
  originalRequest: Request;
  messageResponse: MessageResponse;
}

export interface ReflectionServices {
  v1: ServiceImpl<typeof ServerReflectionV1>;
  v1alpha: ServiceImpl<typeof ServerReflectionV1alpha>;
}

// Files every error of every method refers to without importing them: grpc-status-details-bin is a google.rpc.Status
// whose details are Anys of google/rpc/error_details.proto (ErrorInfo, BadRequest, ...). Without them a client that
// resolves types by reflection (grpcurl, buf curl) cannot decode an error's details: "symbol google.rpc.ErrorInfo not
// found" (docs/callers.md).
const errorFiles: readonly DescFile[] = [file_google_rpc_status, file_google_rpc_error_details];

/**
 * Implements grpc.reflection.v1 and v1alpha ServerReflection for the given
 * services, answering from their files and the files these import, and from
 * the files of the error details every method may answer with.
 */
export function createReflectionServices(services: readonly DescService[]): ReflectionServices {
  const index = new ReflectionIndex(services, errorFiles);
  return {
    v1: { serverReflectionInfo: (requests) => reflect(index, requests) },
    v1alpha: { serverReflectionInfo: (requests) => reflect(index, requests) },
  };
}

async function* reflect<Request extends ReflectionRequest>(
  index: ReflectionIndex,
  requests: AsyncIterable<Request>,
): AsyncGenerator<ReflectionResponse<Request>> {
  // Names of the files sent on this stream: clients keep them, so like
  // grpc-go each dependency goes out once per stream.
  const sent = new Set<string>();
  for await (const request of requests) {
    yield { validHost: request.host, originalRequest: request, messageResponse: index.answer(request.messageRequest, sent) };
  }
}

// A file with its serialized FileDescriptorProto, encoded once up front.
interface IndexedFile {
  // The path as in import statements, "foo/bar.proto".
  name: string;
  encoded: Uint8Array;
  dependencies: IndexedFile[];
}

class ReflectionIndex {
  readonly #serviceNames: string[];
  readonly #files = new Map<string, IndexedFile>();
  readonly #symbols = new Map<string, IndexedFile>();
  // Extension numbers by extendee, with an entry for every known message so
  // that a known message without extensions is told apart from an unknown one.
  readonly #extensions = new Map<string, Map<number, IndexedFile>>();

  constructor(services: readonly DescService[], files: readonly DescFile[]) {
    this.#serviceNames = services.map((service) => service.typeName);
    for (const service of services) {
      this.#addFile(service.file);
    }
    for (const file of files) {
      this.#addFile(file);
    }
  }

  answer(request: ReflectionRequest["messageRequest"], sent: Set<string>): MessageResponse {
    switch (request.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: this.#serviceNames.map((name) => ({ name })) } };
      case "fileByFilename":
        return filesResponse(this.#files.get(request.value), `file ${request.value}`, sent);
      case "fileContainingSymbol":
        return filesResponse(this.#symbols.get(request.value), `symbol ${request.value}`, sent);
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = request.value;
        const file = this.#extensions.get(containingType)?.get(extensionNumber);
        return filesResponse(file, `extension ${extensionNumber} of ${containingType}`, sent);
      }
      case "allExtensionNumbersOfType": {
        const extensions = this.#extensions.get(request.value);
        if (extensions === undefined) {
          return notFound(`type ${request.value}`);
        }
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: request.value, extensionNumber: [...extensions.keys()].sort((a, b) => a - b) },
        };
      }
      case undefined:
        throw invalidArgument("cloudplane", [{ field: "messageRequest", description: "one of the request kinds is required" }]);
    }
  }

  #addFile(file: DescFile): IndexedFile {
    // DescFile.name lacks the ".proto" suffix that reflection clients use.
    const name = file.proto.name;
    const known = this.#files.get(name);
    if (known !== undefined) {
      return known;
    }
    const indexed: IndexedFile = {
      name,
      encoded: toBinary(FileDescriptorProtoSchema, file.proto),
      dependencies: file.dependencies.map((dependency) => this.#addFile(dependency)),
    };
    this.#files.set(name, indexed);
    for (const type of nestedTypes(file)) {
      this.#symbols.set(type.typeName, indexed);
      switch (type.kind) {
        case "service":
          for (const method of type.methods) {
            this.#symbols.set(`${type.typeName}.${method.name}`, indexed);
          }
          break;
        case "message":
          this.#extensionsOf(type.typeName);
          for (const member of [...type.fields, ...type.oneofs]) {
            this.#symbols.set(`${type.typeName}.${member.name}`, indexed);
          }
          break;
        case "enum": {
          // Enum values are scoped like C++ enumerators: as siblings of their enum.
          const scope = type.typeName.slice(0, type.typeName.length - type.name.length);
          for (const value of type.values) {
            this.#symbols.set(scope + value.name, indexed);
          }
          break;
        }
        case "extension":
          this.#extensionsOf(type.extendee.typeName).set(type.number, indexed);
          break;
      }
    }
    return indexed;
  }

  #extensionsOf(typeName: string): Map<number, IndexedFile> {
    const extensions = this.#extensions.get(typeName) ?? new Map<number, IndexedFile>();
    this.#extensions.set(typeName, extensions);
    return extensions;
  }
}

// The requested file always goes out, first, followed breadth-first by its
// transitive dependencies not sent on the stream yet. A file only ever
// enters `sent` together with its own unsent dependencies, so the walk need
// not descend into sent files.
function filesResponse(file: IndexedFile | undefined, what: string, sent: Set<string>): MessageResponse {
  if (file === undefined) {
    return notFound(what);
  }
  const files = [file];
  sent.add(file.name);
  for (const current of files) {
    for (const dependency of current.dependencies) {
      if (!sent.has(dependency.name)) {
        sent.add(dependency.name);
        files.push(dependency);
      }
    }
  }
  return { case: "fileDescriptorResponse", value: { fileDescriptorProto: files.map((f) => f.encoded) } };
}

function notFound(what: string): MessageResponse {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `${what} not found` } };
}
