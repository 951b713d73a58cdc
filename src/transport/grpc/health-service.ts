import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../../gen/grpc/health/v1/health_pb.js";
import type { Health, HealthCheckRequest, HealthCheckResponse } from "../../../gen/grpc/health/v1/health_pb.js";
import { DomainError, notFound } from "../../errors/domain-error.js";

type StatusListener = (status: ServingStatus) => void;

/**
 * Serving status of each service by fully qualified name, where "" stands
 * for the whole server. Like grpc-go, the whole server starts SERVING, and
 * so does each service registered with register().
 */
export class HealthStatus {
  readonly #statuses = new Map<string, ServingStatus>([["", ServingStatus.SERVING]]);
  // Plain sets instead of an EventEmitter: any number of Watch calls may be
  // open on one service, and EventEmitter warns past ten listeners.
  readonly #listeners = new Map<string, Set<StatusListener>>();
  #shutDown = false;

  /** The status of a service, undefined when the service was never set. */
  get(service: string): ServingStatus | undefined {
    return this.#statuses.get(service);
  }

  entries(): IterableIterator<[string, ServingStatus]> {
    return this.#statuses.entries();
  }

  /**
   * Reports each service by the name in its descriptor: SERVING, or
   * NOT_SERVING once shutdown has begun. A service already known keeps its
   * status, so registering twice changes nothing.
   */
  register(services: Iterable<DescService>): void {
    for (const { typeName } of services) {
      if (!this.#statuses.has(typeName)) {
        this.#update(typeName, this.#shutDown ? ServingStatus.NOT_SERVING : ServingStatus.SERVING);
      }
    }
  }

  set(service: string, status: ServingStatus): void {
    // Like grpc-go, updates after shutdown are dropped so that a component
    // finishing late cannot advertise a draining server as SERVING again.
    if (this.#shutDown) {
      return;
    }
    this.#update(service, status);
  }

  /** Marks every service NOT_SERVING for good, for a graceful shutdown. */
  shutdown(): void {
    this.#shutDown = true;
    for (const service of this.#statuses.keys()) {
      this.#update(service, ServingStatus.NOT_SERVING);
    }
  }

  /** Calls the listener on each status change of the service until the returned function is called. */
  subscribe(service: string, listener: StatusListener): () => void {
    const listeners = this.#listeners.get(service) ?? new Set();
    this.#listeners.set(service, listeners);
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) {
        this.#listeners.delete(service);
      }
    };
  }

  /** The number of listeners subscribed to a service, for leak checks and metrics. */
  listenerCount(service: string): number {
    return this.#listeners.get(service)?.size ?? 0;
  }

  #update(service: string, status: ServingStatus): void {
    if (this.#statuses.get(service) === status) {
      return;
    }
    this.#statuses.set(service, status);
    for (const listener of this.#listeners.get(service) ?? []) {
      listener(status);
    }
  }
}

/** Implements grpc.health.v1.Health over the given statuses. */
export function createHealthService(status: HealthStatus): ServiceImpl<typeof Health> {
  return {
    check(request) {
      const current = status.get(request.service);
      if (current === undefined) {
        throw notFound(
          "cloudplane",
          "HEALTH_SERVICE_UNKNOWN",
          { resourceType: "grpc.health.v1 service", resourceName: request.service },
          `unknown service ${request.service}`,
        );
      }
      return { status: current };
    },

    list() {
      const statuses = [...status.entries()].map(([service, current]) => [service, { status: current }] as const);
      return { statuses: Object.fromEntries(statuses) };
    },

    watch(request, context) {
      return watch(status, request, context);
    },
  };
}

async function* watch(
  status: HealthStatus,
  request: HealthCheckRequest,
  { signal }: HandlerContext,
): AsyncGenerator<Pick<HealthCheckResponse, "status">> {
  // An unknown service is reported, not refused: it may be set later.
  let latest = status.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
  let sent: ServingStatus | undefined;
  let wake: (() => void) | undefined;
  // Only the latest status is kept, as in grpc-go: a slow client skips
  // intermediate states instead of making the server buffer them.
  const unsubscribe = status.subscribe(request.service, (changed) => {
    latest = changed;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort);
  try {
    for (;;) {
      if (signal.aborted) {
        // The server's own reason when it shuts down (SERVER_SHUTTING_DOWN), else the caller left or its deadline passed.
        throw signal.reason instanceof DomainError ? signal.reason : ConnectError.from(signal.reason, Code.Canceled);
      }
      if (latest !== sent) {
        sent = latest;
        yield { status: sent };
      } else {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
