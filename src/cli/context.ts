import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { closeServices, openServices, type Services } from '../compose.js';
import { createLogger } from '../logger.js';
import { createOutput, type Output } from './output.js';

/**
 * Runs a command body against the same services the server uses, opened on the same database.
 * The running server sees every change at once: nothing is cached across requests there.
 */
export async function withServices(
  command: Command,
  body: (services: Services, out: Output) => Promise<void>,
): Promise<void> {
  const config = loadConfig();
  // Command output goes to stdout; the service log (warnings only) to stderr.
  const logger = createLogger(config.logLevel ?? 'warn', process.stderr);
  const services = await openServices(config, logger);
  try {
    await body(services, createOutput(Boolean(command.optsWithGlobals().json)));
  } finally {
    await closeServices(services);
  }
}
