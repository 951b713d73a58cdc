import net from "node:net";

// A TCP proxy between the server and a service it depends on (PostgreSQL, Redis), for outages: `silence` makes every
// connection open now go silent (nothing forwarded either way, nothing closed), as a dropped route does, while new
// connections go through; `blackhole` makes new ones silent too, until `restore`.
export interface TcpProxy {
  // The service's URL with the proxy in its place.
  url: string;
  silence(): void;
  blackhole(): void;
  restore(): void;
  close(): Promise<void>;
}

// A proxy in front of the service at `serviceUrl` (its port, else `defaultPort`).
export async function startTcpProxy(serviceUrl: string, defaultPort: number): Promise<TcpProxy> {
  const target = new URL(serviceUrl);
  const targetPort = Number(target.port || defaultPort);
  const targetHost = target.hostname;
  const open = new Set<{ client: net.Socket; upstream: net.Socket; silent: boolean }>();
  let blackholed = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    const link = { client, upstream, silent: blackholed };
    open.add(link);
    const close = (): void => {
      open.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", () => !link.silent && close());
    upstream.on("close", () => !link.silent && close());
    client.on("data", (data: Buffer) => !link.silent && upstream.write(data));
    upstream.on("data", (data: Buffer) => !link.silent && client.write(data));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  const viaProxy = new URL(serviceUrl);
  viaProxy.hostname = "127.0.0.1";
  viaProxy.port = String(port);
  return {
    url: viaProxy.toString(),
    silence() {
      for (const link of open) link.silent = true;
    },
    blackhole() {
      blackholed = true;
      for (const link of open) link.silent = true;
    },
    restore() {
      blackholed = false;
    },
    async close() {
      for (const link of open) {
        link.client.destroy();
        link.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
