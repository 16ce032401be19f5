from autoglm.bench.figures.command import main

raise SystemExit(main())
