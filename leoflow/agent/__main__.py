import sys

from leoflow.agent import main

sys.exit(main(sys.argv[1:]))
