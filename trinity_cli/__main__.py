from trinity_cli.cli import main

main()
