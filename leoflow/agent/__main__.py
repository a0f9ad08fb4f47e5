import sys

from leoflow.agent import main, quick_exit, startup_gc

quick_exit.arm()
startup_gc.pause()
sys.exit(quick_exit.returned(main(sys.argv[1:])))
