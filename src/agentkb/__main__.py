from agentkb.cli import main

main()
