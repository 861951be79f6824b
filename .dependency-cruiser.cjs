/**
 * The layering rule of docs/architecture.md, checked by dependency-cruiser in `npm test`
 * (`npm run lint:deps`). Bottom to top: platform → compute → features → composition
 * (src/app.ts, src/runtime.ts, src/main.ts, src/cli/, src/threads/). An arrow back up fails the suite.
 */
const FEATURES = '(accounts|alerts|batch|events|fields|imagery|indices|reports|subscriptions|webhooks)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles, dynamic import() and type-only imports included.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'platform-imports-no-feature-or-compute',
      severity: 'error',
      comment: 'src/platform/ is the bottom layer: it imports nothing above it.',
      from: { path: '^src/platform/' },
      to: { path: [`^src/${FEATURES}/`, '^src/compute/', '^src/(app|runtime|main)\\.ts$', '^src/(cli|threads)/'] },
    },
    {
      name: 'compute-imports-no-feature',
      severity: 'error',
      comment: 'src/compute/ imports platform only.',
      from: { path: '^src/compute/' },
      to: { path: [`^src/${FEATURES}/`, '^src/(app|runtime|main)\\.ts$', '^src/(cli|threads)/'] },
    },
    {
      name: 'features-import-no-composition',
      severity: 'error',
      comment: 'Features never import the composition layer (app, runtime, main, cli, threads).',
      from: { path: `^src/${FEATURES}/` },
      to: { path: ['^src/(app|runtime|main)\\.ts$', '^src/(cli|threads)/'] },
    },
    {
      name: 'features-only-public-entry-of-other-features',
      severity: 'error',
      comment: 'A feature imports another feature only through its src/<feature>/index.ts.',
      from: { path: `^src/${FEATURES}/` },
      to: { path: `^src/${FEATURES}/`, pathNot: ['^src/$1/', `^src/${FEATURES}/index\\.ts$`] },
    },
    {
      name: 'workers-import-no-http',
      severity: 'error',
      comment: 'Queue workers and the outbox dispatcher run without an HTTP server: no Fastify, no platform/http.',
      from: { path: '^src/(webhooks/(delivery|dispatcher)|reports/worker|batch/(worker|execute)|events/seasons)\\.ts$' },
      to: { path: ['^src/platform/http/', '^node_modules/(fastify|@fastify/|fastify-plugin)'] },
    },
    {
      name: 'not-to-test-from-src',
      severity: 'error',
      comment: 'Production code never imports test code.',
      from: { path: '^(src|bench)/' },
      to: { path: '^test/' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'A module in src/ that nothing imports is dead code (entry points and declarations excepted).',
      from: {
        orphan: true,
        path: '^src/',
        pathNot: ['\\.d\\.ts$', '^src/main\\.ts$', '^src/cli/', '^src/threads/'],
      },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts'],
    },
  },
};
