from rtmodel_cli.app import main

main()
