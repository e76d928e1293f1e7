from hyperjob.cli import main

main()
