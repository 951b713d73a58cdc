import type net from "node:net";

// Resolves once every socket of `sockets` has closed, or after `withinMs`, whichever comes first. The set is the
// server's own, which a listener that has stopped accepting no longer adds to.
export function socketsClosed(sockets: ReadonlySet<net.Socket>, withinMs: number): Promise<void> {
  const open = [...sockets].filter((socket) => !socket.destroyed);
  if (open.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    let left = open.length;
    const timer = setTimeout(resolve, withinMs);
    timer.unref();
    const closed = (): void => {
      if (--left > 0) return;
      clearTimeout(timer);
      resolve();
    };
    for (const socket of open) socket.once("close", closed);
  });
}
