// The HTML report's share of the UI's code (shared.ts), as the global `parmonShared` its inline
// chart script calls (src/analysis/view_html.cc). Bundled by esbuild as an IIFE.
import * as shared from './shared';

(globalThis as unknown as { parmonShared: typeof shared }).parmonShared = shared;
