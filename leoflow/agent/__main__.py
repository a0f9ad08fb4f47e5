import sys

from leoflow.agent import main, quick_exit

quick_exit.arm()
sys.exit(quick_exit.returned(main(sys.argv[1:])))
