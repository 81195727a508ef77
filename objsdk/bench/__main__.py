import sys

from objsdk.bench import main

sys.exit(main())
