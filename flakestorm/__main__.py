from flakestorm.cli import main

main()
