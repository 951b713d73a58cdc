// A setting the server cannot use: the start stops with exit 2 and this message, which names the setting (README,
// "Settings and the master key"). Apart from config.ts so that the modules reading a setting's file can throw it.
export class ConfigError extends Error {}
