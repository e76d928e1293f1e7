from hyperjob.cli.main import main

main()
