// Loaded with --import into every server the bench starts: if the bench dies without killing its children (SIGKILL,
// a crash), the child notices its parent is gone within a second and exits, so no server outlives a run.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 1000).unref();
