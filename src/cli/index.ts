import { run } from './program.js';

await run(process.argv);
