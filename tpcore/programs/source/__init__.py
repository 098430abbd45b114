"""Program source files: a program IR written as a Python program plus its weights CSV, and such
a file (tpcore's or the authors' published format) read back into the IR without running it.

Each format has one home where its writer and reader sit side by side:

- :mod:`~tpcore.programs.source.writer`: ``write``, ``source``, ``line_counts``,
  ``module_lines``; a file's layout, the same for every format;
- :mod:`~tpcore.programs.source.reader`: ``parse_file``, ``parse_source``; the grammar of a
  program file, the same for every format;
- :mod:`~tpcore.programs.source.tpcore_style`, :mod:`~tpcore.programs.source.published_style`:
  what one format writes and reads (:class:`~tpcore.programs.source.style.Style`);
- :mod:`~tpcore.programs.source.templates`: the lines both formats write and read;
  :mod:`~tpcore.programs.source.library`: the helper functions' texts;
- :mod:`~tpcore.programs.source.sections`: each module's section of ``run``;
  :mod:`~tpcore.programs.source.predicates`, :mod:`~tpcore.programs.source.mlps`: predicate and
  MLP functions, written and read;
- :mod:`~tpcore.programs.source.layout`: literals and 88-character lines;
  :mod:`~tpcore.programs.source.grammar`: syntax trees and refusals;
- :mod:`~tpcore.programs.source.parsed`, :mod:`~tpcore.programs.source.build`,
  :mod:`~tpcore.programs.source.decisions`: what a file parses into, and the IR built from it;
- :mod:`~tpcore.programs.source.weights_csv`: the weights CSV, written and read.
"""
