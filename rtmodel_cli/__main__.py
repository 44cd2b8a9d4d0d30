from rtmodel_cli.entry import main

main()
