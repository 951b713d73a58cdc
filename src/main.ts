import { CatalogError } from "./compute/catalog/json-reader.js";
import { ConfigError, checkHost, helpText, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { build } from "./server.js";
import { DatabaseInUseError } from "./storage/sqlite/database.js";

// Reads the settings, starts the server, and stops it gracefully on SIGTERM or SIGINT.
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.argv.slice(2), process.env);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${helpText()}`);
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(helpText());
    return;
  }
  await checkHost(config.host);
  const logger = createLogger(config.logLevel);
  const app = await build(config, logger);
  let port: number;
  try {
    port = await app.listen();
  } catch (err) {
    await app.close();
    throw listenRefusal(err, config.host, config.port);
  }
  logger.info({ port, dataDir: config.dataDir, store: config.databaseUrl === "" ? "sqlite" : "postgres", tls: config.tlsCertFile !== "" }, "cloudplane listening");
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: finishing in-flight calls");
    app.close().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

// The address HOST and PORT name cannot be listened on: a setting the server cannot use, named as the others are
// (it was Node's "listen EADDRINUSE: address already in use 127.0.0.1:8080", exit 1). Found only when the server
// listens, once its store is open: the port could be taken or freed meanwhile whenever it was looked at first.
function listenRefusal(err: unknown, host: string, port: number): unknown {
  const code = (err as { code?: string }).code;
  if (code === "EADDRINUSE") return new ConfigError(`--port (PORT) ${port} is in use on ${host}: stop what listens there, or choose another port`);
  if (code === "EACCES") return new ConfigError(`--port (PORT) ${port} needs privileges this user does not have: choose a port above 1023`);
  if (code === "EADDRNOTAVAIL") return new ConfigError(`--host (HOST) ${host} is not an address of this machine: give one of its addresses, or 0.0.0.0`);
  return err;
}

// Exit 2 when the operator must change what the server was given (a setting it cannot use, found by build() or by
// resolving HOST; a catalog whose content is wrong; a data directory another process holds), as for the settings
// above; 1 for any other failure (a wrong master key, a lost database, a store that refuses).
main().catch((err: unknown) => {
  const message = err instanceof ConfigError || err instanceof Error ? err.message : String(err);
  process.stderr.write(`cloudplane failed to start: ${message}\n`);
  process.exit(err instanceof ConfigError || err instanceof CatalogError || err instanceof DatabaseInUseError ? 2 : 1);
});
